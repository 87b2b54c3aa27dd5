// Package offline provides a summarizer and fact extractors that need no
// model, so that chatmem keeps a conversation's key facts with no API key.
// Everything here is deterministic (the same input gives the same output),
// uses only the standard library, and treats the transcript as data: text
// that looks like an instruction is summarized or matched like any other.
//
// [Summarizer] writes an extractive rolling summary. It keeps the sentences
// that carry IDs (SE-10423, order #12345), emails, phone numbers, names
// (capitalized words inside a sentence, and words like "DryFit"), amounts
// (Rs 249, $12.50), dates and times (8 pm, Monday, 12 May 2024) and
// commitments and open questions ("I will", "should arrive", "please", a
// question), one line per message, prefixed with who said it:
//
//	user: I'm Kavya. My order SE-10423 hasn't arrived.
//	assistant: It is out for delivery and should arrive by 8 pm.
//
// Pleasantries ("Sorry Kavya!", "Thanks a lot!") and opening fillers ("Hi,",
// "Ok.") are dropped. The previous summary's lines are candidates again, so
// the summary rolls; under its character cap the sentence that first carries
// each ID, contact or name goes in before any other.
//
// [Rules] is an extractor of named regular expressions applied to user
// messages only; [DefaultRules] finds name, order_id, ticket_id, email,
// phone, the language asked for, address, diet, allergy, contact_channel,
// size, amount, date and flight, and drops what a clause negates, gives to
// someone else or marks as past. [DetectLanguage] tells the language a
// message is written in (RulesOptions.Language stores it as
// written_language).
//
// Limits: the summary copies sentences, it does not paraphrase, so it is
// only as short as the conversation's chit-chat is long; it cannot tell
// which of two equally scored sentences matters more, nor resolve "it" or
// "that one". Names are found by capitalization, so lowercase names ("i'm
// kavya") and names in scripts without case (Devanagari, Han) are missed,
// and a capitalized word that is not a name ("I'm Canadian", not in the
// stopword list) can be taken for one. Order IDs are found only after the
// word "order" (or pedido, commande, Bestellung, encomenda, ordine). The
// language detector knows English, Spanish, French, German, Portuguese and
// Italian by their common words and other languages only by script
// (Devanagari is taken as Hindi, Cyrillic as Russian or Ukrainian, Arabic
// script as Arabic, Persian or Urdu); it stays silent on short or mixed
// text. Sentences are split by punctuation with a short abbreviation list,
// so unusual abbreviations can split a sentence in two.
package offline
