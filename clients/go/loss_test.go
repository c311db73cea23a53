package padlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func within(t *testing.T, d time.Duration, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("not within %v: %s", d, what)
	}
}

func TestALostHoldCancelsItsContext(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		for _, how := range []string{"DEL", "SET"} {
			l := p.Lock("lost:"+how, TTL(3*time.Second))
			held, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if how == "DEL" {
				r.Del(ctx, "lost:"+how)
			} else {
				r.Set(ctx, "lost:"+how, "someone else's", 0)
			}
			// The server mails the loss: well within one interval (1 s).
			within(t, time.Second, how+": the held context is cancelled", held.Done())
			if !errors.Is(context.Cause(held), ErrLost) {
				t.Fatalf("%s: cause %v, want ErrLost", how, context.Cause(held))
			}
			if l.Held(held) {
				t.Fatalf("%s: Held after the loss", how)
			}
			err = l.Release(held)
			if !errors.Is(err, ErrLost) || !errors.Is(err, ErrNotHeld) {
				t.Fatalf("%s: releasing a lost hold: %v", how, err)
			}
		}
	})
}

// Its connection killed, a hold binds again on the next one: kept past
// its ttl, never lost.
func TestAKilledConnectionBindsAgain(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		l := p.Lock("kept", TTL(time.Second))
		held, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holder, _ := HolderFrom(held)
		if err := r.Do(ctx, "CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		if held.Err() != nil || !l.Held(held) {
			t.Fatalf("lost after a reconnect: %v", context.Cause(held))
		}
		if got := fmt.Sprint(info(t, r, "LOCK.INFO", "kept")["holder"]); got != holder {
			t.Fatalf("the key's holder is %q, want %q", got, holder)
		}
		if got := info(t, r, "LOCK.INFO", "kept")["keep"]; got != int64(1) {
			t.Fatalf("keep %v: the lease is not bound again", got)
		}
		_ = l.Release(held)
	})
}

// A server that stops answering: the hold says it is not held once its
// lease may have run out, and its context is cancelled.
func TestAnUnreachableServerEndsTheHoldWithinItsLease(t *testing.T) {
	s := startServer(t)
	proxy := startProxy(t, s.port)
	p := clientOn(t, fmt.Sprintf("127.0.0.1:%d", proxy.port))
	l := p.Lock("cut", TTL(time.Second))
	held, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	proxy.blackhole()
	cut := time.Now()
	eventually(t, 2*time.Second, "Held turns false", func() bool { return !l.Held(held) })
	if d := time.Since(cut); d > 1200*time.Millisecond {
		t.Fatalf("held %v after the cut, with a 1 s lease", d)
	}
	within(t, 3*time.Second, "the held context is cancelled", held.Done())
	if !errors.Is(context.Cause(held), ErrLost) {
		t.Fatalf("cause %v", context.Cause(held))
	}
}

// A reply lost after the server applied the command: the resend, with the
// same request-id, neither doubles a reentry nor frees a nested hold.
func TestALostReplyNeitherDoublesNorFrees(t *testing.T) {
	s := startServer(t)
	proxy := startProxy(t, s.port)
	p := clientOn(t, fmt.Sprintf("127.0.0.1:%d", proxy.port))
	r, ctx := s.raw(t), context.Background()
	l := p.Lock("resent", TTL(5*time.Second))
	outer, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.drop("LOCK.ACQUIRE")
	inner, ok, err := l.TryAcquire(outer)
	if !ok || err != nil {
		t.Fatalf("the reentry through a lost reply: %v %v", ok, err)
	}
	if got := info(t, r, "LOCK.INFO", "resent")["count"]; got != int64(2) {
		t.Fatalf("count %v after one reentry whose reply was lost, want 2", got)
	}
	proxy.drop("LOCK.RELEASE")
	if err := l.Release(inner); err != nil {
		t.Fatal(err)
	}
	if got := info(t, r, "LOCK.INFO", "resent")["count"]; got != int64(1) {
		t.Fatalf("count %v after the inner release was resent, want 1", got)
	}
	if !l.Held(outer) {
		t.Fatal("the outer hold is gone")
	}
	if n := proxy.dropped(); n != 2 {
		t.Fatalf("the proxy lost %d replies, want 2", n)
	}
	_ = l.Release(outer)
}

// A KEEP acquire or renewal whose reply was lost (applied, then the
// connection closed) is resent with its id and answered from the server's
// memory of the first sending, which bound the lease to the connection
// that closed: the client binds it again on the new one, so the hold
// outlives its ttl, kept.
func TestAKeptLeaseAnsweredToAResendIsBoundAgain(t *testing.T) {
	for _, lost := range []string{"LOCK.ACQUIRE", "LOCK.EXTEND"} {
		t.Run(lost, func(t *testing.T) {
			s := startServer(t)
			proxy := startProxy(t, s.port)
			p := clientOn(t, fmt.Sprintf("127.0.0.1:%d", proxy.port))
			r, ctx := s.raw(t), context.Background()
			l := p.Lock("kept", TTL(600*time.Millisecond))
			var held context.Context
			var err error
			if lost == "LOCK.ACQUIRE" {
				proxy.drop(lost)
				held, err = l.Acquire(ctx)
			} else {
				held, err = l.Acquire(ctx)
				proxy.drop(lost)
				// The keeper killed: the hold binds again on the next one,
				// and the reply to that is lost.
				r.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
			}
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 3*time.Second, "the reply lost", func() bool { return proxy.dropped() == 1 })
			time.Sleep(1500 * time.Millisecond) // the first connection's binding would have run out
			if got := info(t, r, "LOCK.INFO", "kept")["keep"]; got != int64(1) {
				t.Fatalf("keep %v, want 1 (bound on the new connection)", got)
			}
			if !l.Held(held) {
				t.Fatal("not held")
			}
			_ = l.Release(held)
		})
	}
}

// A hold judged lost without the server saying so (a renewal that got no
// answer: marked here as the watcher marks it) may still be counted
// there. The holder's next take is a fresh hold with a new fence, not a
// reentry of the lost one with its old fence and a count nobody sees.
func TestAHoldLostUnansweredIsReleasedBeforeItsHolderTakesAgain(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), WithHolder(context.Background(), "h")
		l := p.Lock("leftover", TTL(5*time.Second))
		held, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old, _ := l.Fence(held)
		h := p.peek(held, lockSpec{"leftover"})
		h.st.Lock()
		h.unsure = true
		h.st.Unlock()
		h.markLost(ErrLost)
		within(t, time.Second, "the held context is cancelled", held.Done())
		if got := info(t, r, "LOCK.INFO", "leftover")["count"]; got != int64(1) {
			t.Fatalf("the server counts %v, want 1", got)
		}
		again, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fence, _ := l.Fence(again); fence <= old {
			t.Fatalf("fence %d after %d: a reentry of the lost hold", fence, old)
		}
		if got := info(t, r, "LOCK.INFO", "leftover")["count"]; got != int64(1) {
			t.Fatalf("the server counts %v, want 1", got)
		}
		if err := l.Release(again); err != nil {
			t.Fatal(err)
		}
		if n := r.Exists(context.Background(), "leftover").Val(); n != 0 {
			t.Fatalf("still held after the release")
		}
	})
}

// A holder never seen again leaves its leftover behind: past the bound,
// expired ones and then any go, so they cost a bounded amount.
func TestHoldsLeftOverAreBounded(t *testing.T) {
	c := &Client{leftovers: map[string]leftover{}}
	c.leftovers["expired"] = leftover{nil, mono() - time.Second}
	for i := range leftMax + 5 {
		c.leftOver(fmt.Sprint("k", i), []any{"LOCK.RELEASE"}, time.Second)
	}
	if n := len(c.leftovers); n != leftMax {
		t.Fatalf("%d remembered, want %d", n, leftMax)
	}
	if _, ok := c.leftovers["expired"]; ok {
		t.Fatal("an expired leftover outlived the bound")
	}
	if l := c.leftovers[fmt.Sprint("k", leftMax+4)]; l.until < mono()+9*time.Second {
		t.Fatalf("the newest kept until %v, want 10 s from now at least", l.until-mono())
	}
}
