package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UsageStore = (*Store)(nil)

// The cost ledger's keys all share the hash tag {usage}, so that a batch
// of usage, whatever its tenants, is added by one script, atomically, on
// a Redis Cluster too (usage is written in batches, seconds apart: one
// slot holds it easily). With the default prefix:
//
//	chatmem:{usage}:tenants          set: the tenants with usage
//	chatmem:{usage}:d:<YYYYMMDD>:<tenant>
//	                                 hash: one UTC day of the tenant's usage,
//	                                 field "<hour>|<user>|<conversation>|<model>|<kind>|<count>"
//	                                 (hour in Unix seconds, user and
//	                                 conversation empty for none, count one of
//	                                 c i ci o r e: calls, input, cached input,
//	                                 output, reasoning, embedding input)
//	                                 -> the count (HINCRBY)
//	chatmem:{usage}:u:<tenant>/<user> set: the day keys holding the user's fields
//
// IDs, tenants and models hold no '|' (chatmem.ValidateID,
// chatmem.ValidateModel), so a field splits back unambiguously.

// usageCounts are the suffixes of a bucket's fields, in the order of
// usageValues.
var usageCounts = []string{"c", "i", "ci", "o", "r", "e"}

func usageValues(r chatmem.UsageRecord) []int64 {
	return []int64{r.Calls, r.Input, r.CachedInput, r.Output, r.Reasoning, r.EmbeddingInput}
}

func (s *Store) usageTenants() string { return s.prefix + ":{usage}:tenants" }
func (s *Store) usageDay(tenant string, t time.Time) string {
	return s.prefix + ":{usage}:d:" + t.UTC().Format("20060102") + ":" + tenant
}
func (s *Store) usageUser(user chatmem.Key) string {
	return s.prefix + ":{usage}:u:" + user.Tenant + "/" + user.ID
}

// addUsageScript adds records: KEYS[1] is the tenants set, then per
// record its day key and its user's set (or the day key again for no
// user); ARGV per record: tenant, user (” for none), the field's base
// and the six counts.
var addUsageScript = newScript(`
local a = 1
for k = 2, #KEYS, 2 do
  local day, uset = KEYS[k], KEYS[k+1]
  local tenant, user, base = ARGV[a], ARGV[a+1], ARGV[a+2]
  redis.call('SADD', KEYS[1], tenant)
  local sfx = {'c', 'i', 'ci', 'o', 'r', 'e'}
  for j = 1, 6 do
    local n = ARGV[a+2+j]
    if n ~= '0' then redis.call('HINCRBY', day, base .. '|' .. sfx[j], n) end
  end
  if user ~= '' then redis.call('SADD', uset, day) end
  a = a + 9
end
return 1
`)

// anonymizeUsageScript moves the fields of user ARGV[1] in the day keys
// KEYS[2..] to the fields with no user and no conversation, and takes
// those keys out of the user's set KEYS[1]; it returns how many day keys
// the set still holds (added meanwhile).
var anonymizeUsageScript = newScript(`
local user = ARGV[1]
local function split(f)
  local parts, from = {}, 1
  while true do
    local i = string.find(f, '|', from, true)
    if not i then parts[#parts+1] = string.sub(f, from); return parts end
    parts[#parts+1] = string.sub(f, from, i - 1)
    from = i + 1
  end
end
for k = 2, #KEYS do
  local day = KEYS[k]
  local all = redis.call('HGETALL', day)
  for i = 1, #all, 2 do
    local p = split(all[i])
    if #p == 6 and p[2] == user then
      redis.call('HDEL', day, all[i])
      redis.call('HINCRBY', day, p[1] .. '|||' .. p[4] .. '|' .. p[5] .. '|' .. p[6], all[i+1])
    end
  end
  redis.call('SREM', KEYS[1], day)
end
return redis.call('SCARD', KEYS[1])
`)

// AddUsage adds each record to its hour bucket, all in one script; see
// chatmem.UsageStore.
func (s *Store) AddUsage(ctx context.Context, recs []chatmem.UsageRecord) error {
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("redis: add usage: %w", err)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	keys := make([]string, 0, 1+2*len(recs))
	args := make([]any, 0, 9*len(recs))
	keys = append(keys, s.usageTenants())
	for _, r := range recs {
		day := s.usageDay(r.Tenant, r.Hour)
		uset := day
		if r.User != "" {
			uset = s.usageUser(chatmem.Key{Tenant: r.Tenant, ID: r.User})
		}
		keys = append(keys, day, uset)
		args = append(args, r.Tenant, r.User, strconv.FormatInt(r.Hour.Unix(), 10)+"|"+r.User+"|"+r.Conversation+"|"+r.Model+"|"+r.Kind)
		for _, n := range usageValues(r) {
			args = append(args, strconv.FormatInt(n, 10))
		}
	}
	// Never resent: a reply lost after the script ran would count twice.
	if _, err := s.runOnce(ctx, addUsageScript, keys, args); err != nil {
		return fmt.Errorf("redis: add usage: %w", err)
	}
	return nil
}

// Usage reads the day keys of q's tenants and hours and sums them; see
// chatmem.UsageStore.
func (s *Store) Usage(ctx context.Context, q chatmem.UsageQuery) ([]chatmem.Usage, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("redis: usage: %w", err)
	}
	tenants := []string{q.Tenant}
	if q.Tenant == "" {
		var err error
		if tenants, err = s.client.SMembers(ctx, s.usageTenants()).Result(); err != nil {
			return nil, fmt.Errorf("redis: usage: %w", wrap(ctx, err))
		}
	}
	var cmds []*goredis.MapStringStringCmd
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, t := range tenants {
			for d := q.From.UTC().Truncate(24 * time.Hour); d.Before(q.To); d = d.Add(24 * time.Hour) {
				cmds = append(cmds, p.HGetAll(ctx, s.usageDay(t, d)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: usage: %w", wrap(ctx, err))
	}
	type bk struct{ hour, user, conv, model, kind string }
	buckets := map[bk]*chatmem.UsageRecord{}
	for _, cmd := range cmds {
		for f, v := range cmd.Val() {
			p := strings.Split(f, "|")
			if len(p) != 6 {
				continue
			}
			sec, err1 := strconv.ParseInt(p[0], 10, 64)
			n, err2 := strconv.ParseInt(v, 10, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("redis: usage: field %q = %q is not a count", f, v)
			}
			tenant := tenantOfKey(cmd.Args()[1].(string))
			k := bk{p[0] + "/" + tenant, p[1], p[2], p[3], p[4]}
			r := buckets[k]
			if r == nil {
				r = &chatmem.UsageRecord{Hour: time.Unix(sec, 0).UTC(), Usage: chatmem.Usage{Tenant: tenant, User: p[1], Conversation: p[2], Model: p[3], Kind: p[4]}}
				buckets[k] = r
			}
			switch p[5] {
			case "c":
				r.Calls += n
			case "i":
				r.Input += n
			case "ci":
				r.CachedInput += n
			case "o":
				r.Output += n
			case "r":
				r.Reasoning += n
			case "e":
				r.EmbeddingInput += n
			}
		}
	}
	recs := make([]chatmem.UsageRecord, 0, len(buckets))
	for _, r := range buckets {
		recs = append(recs, *r)
	}
	return chatmem.GroupUsage(recs, q), nil
}

// tenantOfKey returns the tenant of a day key.
func tenantOfKey(key string) string {
	i := strings.Index(key, ":{usage}:d:")
	return key[i+len(":{usage}:d:")+len("20060102:"):]
}

// AnonymizeUsage moves the user's fields to those with no user and no
// conversation, a script per batch of the user's day keys; see
// chatmem.UsageStore.
func (s *Store) AnonymizeUsage(ctx context.Context, user chatmem.Key) error {
	if err := storekit.CheckUser(user); err != nil {
		return fmt.Errorf("redis: anonymize usage: %w", err)
	}
	uset := s.usageUser(user)
	for range 1000 {
		days, err := s.client.SMembers(ctx, uset).Result()
		if err != nil {
			return fmt.Errorf("redis: anonymize the usage of %s: %w", user, wrap(ctx, err))
		}
		if len(days) == 0 {
			return nil
		}
		v, err := s.run(ctx, anonymizeUsageScript, append([]string{uset}, days...), user.ID)
		if err != nil {
			return fmt.Errorf("redis: anonymize the usage of %s: %w", user, err)
		}
		if n, _ := v.(int64); n == 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: redis: anonymize the usage of %s: days keep being added", chatmem.ErrUnavailable, user)
}
