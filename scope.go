package chatmem

import "strings"

// userFactKeys are the fact keys that belong to the person rather than to
// one conversation: who they are, how to reach them, the language they
// asked for, where they live.
var userFactKeys = map[string]bool{
	"name": true, "first_name": true, "last_name": true, "full_name": true, "nickname": true,
	"email": true, "phone": true, "language": true, "locale": true, "timezone": true,
	"address": true, "location": true, "city": true, "country": true, "postcode": true, "zip": true,
	"birthday": true, "pronouns": true, "company": true, "job_title": true,
}

// userFactPrefixes start the keys of stated preferences and of the parts
// of a user key ("address.city", "preference.seat").
var userFactPrefixes = []string{
	"pref", "likes", "dislikes", "allerg", "diet",
	"name.", "email.", "phone.", "address.", "address_", "location.", "shipping.", "shipping_", "billing.", "billing_",
}

// ScopeOf returns the scope a fact with this key has when an extractor
// finds it: ScopeUser for what belongs to the person (name, contact
// details, language, address and location, stated preferences),
// ScopeConversation for everything else, order and ticket IDs among them.
// The worker stores facts of ScopeUser with the conversation's user, if it
// has one; a conversation without a user keeps all its facts itself. An
// app setting facts chooses the scope itself, by the route it uses.
func ScopeOf(key string) string {
	if userFactKeys[key] {
		return ScopeUser
	}
	for _, p := range userFactPrefixes {
		if strings.HasPrefix(key, p) {
			return ScopeUser
		}
	}
	return ScopeConversation
}
