package httpapi

import (
	"sync"
	"time"
)

// RateLimit bounds each tenant's API requests with a token bucket: Burst
// requests at once, refilled at PerSecond. A request over it is answered
// 429 rate_limited with Retry-After. The zero value means no limit.
type RateLimit struct {
	PerSecond float64
	Burst     int // zero: max(1, PerSecond)
}

// rateLimiter keeps one token bucket per tenant. Tenants come from the
// configured keys, so the map is bounded by them (or is the one default
// tenant).
type rateLimiter struct {
	perSecond float64
	burst     float64
	now       func() time.Time
	mu        sync.Mutex
	buckets   map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateLimiter(l RateLimit, now func() time.Time) *rateLimiter {
	if l.PerSecond <= 0 {
		return nil
	}
	burst := float64(l.Burst)
	if burst <= 0 {
		burst = max(1, l.PerSecond)
	}
	return &rateLimiter{perSecond: l.PerSecond, burst: burst, now: now, buckets: make(map[string]*bucket)}
}

// allow takes a token from tenant's bucket, or reports how long until one
// is there. A nil limiter allows everything.
func (r *rateLimiter) allow(tenant string) (time.Duration, bool) {
	if r == nil {
		return 0, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	b, ok := r.buckets[tenant]
	if !ok {
		b = &bucket{tokens: r.burst, at: now}
		r.buckets[tenant] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.perSecond)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / r.perSecond * float64(time.Second)), false
}
