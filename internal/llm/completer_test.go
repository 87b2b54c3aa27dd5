package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
)

// fakeCompleter is a Completer that records each request and answers with
// reply, standing in for a provider: the provider packages test their wire
// format against fakes of the real APIs.
type fakeCompleter struct {
	mu   sync.Mutex
	reqs []Request
	// reply, if set, answers the n-th request (from 1); nil answers
	// "A summary.".
	reply func(n int, req Request) (string, error)
}

var _ Completer = (*fakeCompleter)(nil)

func (f *fakeCompleter) Name() string { return "test:model" }

func (f *fakeCompleter) Complete(_ context.Context, req Request) (string, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	n, reply := len(f.reqs), f.reply
	f.mu.Unlock()
	if reply == nil {
		return "A summary.", nil
	}
	return reply(n, req)
}

// answers returns a fakeCompleter that answers every request with text.
func answers(text string) *fakeCompleter {
	return &fakeCompleter{reply: func(int, Request) (string, error) { return text, nil }}
}

func (f *fakeCompleter) requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// last returns the last request.
func (f *fakeCompleter) last(t *testing.T) Request {
	t.Helper()
	reqs := f.requests()
	if len(reqs) == 0 {
		t.Fatal("the completer received no request")
	}
	return reqs[len(reqs)-1]
}

func TestStatusError(t *testing.T) {
	for _, tc := range []struct {
		code   int
		want   error // nil: neither sentinel
		reject error
	}{
		{http.StatusRequestTimeout, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{http.StatusConflict, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{http.StatusTooManyRequests, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{http.StatusInternalServerError, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{http.StatusBadGateway, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{http.StatusServiceUnavailable, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{529, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{http.StatusBadRequest, chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{http.StatusUnauthorized, chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{http.StatusForbidden, chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{http.StatusNotFound, chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{http.StatusUnprocessableEntity, chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{http.StatusFound, nil, nil},
	} {
		detail := fmt.Sprintf("%d %s: the provider's message", tc.code, http.StatusText(tc.code))
		err := StatusError(tc.code, detail)
		switch {
		case tc.want == nil && (errors.Is(err, chatmem.ErrUnavailable) || errors.Is(err, chatmem.ErrInvalid)):
			t.Errorf("StatusError(%d) = %v, want neither sentinel", tc.code, err)
		case tc.want != nil && (!errors.Is(err, tc.want) || errors.Is(err, tc.reject)):
			t.Errorf("StatusError(%d) = %v, want one wrapping %v (and not %v)", tc.code, err, tc.want, tc.reject)
		}
		if !strings.Contains(err.Error(), detail) {
			t.Errorf("StatusError(%d) = %q, lacks the detail %q", tc.code, err, detail)
		}
	}
}

func TestRequestError(t *testing.T) {
	netErr := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	if err := RequestError(context.Background(), netErr); !errors.Is(err, chatmem.ErrUnavailable) || !errors.Is(err, netErr) {
		t.Errorf("network failure: RequestError = %v, want ErrUnavailable and the cause", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	if err := RequestError(ctx, ctx.Err()); !errors.Is(err, chatmem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after the deadline: RequestError = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}

	// A caller that cancels gets its cancellation back, which says nothing
	// about the provider.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := RequestError(ctx, ctx.Err()); !errors.Is(err, context.Canceled) || errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("after cancel: RequestError = %v, want context.Canceled only", err)
	}
}
