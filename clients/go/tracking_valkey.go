package padlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"
)

// valkey-go's side of cluster mailboxes: a dedicated RESP3 connection
// tracks the prefix on itself with NOLOOP (its own pops are no notice), and
// its invalidation hook, called by the connection's reader before the
// replies that follow the push, queues the keys named.
type valkeyTracker struct {
	w       *valkeyWire
	notices chan *notice
	closed  <-chan error
	// overflow: a notice did not fit in the queue (a sweep of every
	// mailbox stands for it); pongDue: a ping was answered, and what it
	// vouches for is queued (both used by the mailman's goroutine alone,
	// but overflow, set by the hook's).
	overflow atomic.Bool
	pongDue  bool
}

func (v *valkeyBackend) track(ctx context.Context, node, prefix string) (tracker, error) {
	w, err := v.open(ctx, node)
	if err != nil {
		return nil, err
	}
	vw := w.(*valkeyWire)
	t := &valkeyTracker{w: vw, notices: make(chan *notice, 256)}
	t.closed = vw.d.SetOnInvalidations(func(keys []valkey.ValkeyMessage) {
		n := &notice{all: keys == nil}
		for _, k := range keys {
			if s, err := k.ToString(); err == nil {
				n.keys = append(n.keys, s)
			}
		}
		select {
		case t.notices <- n:
		default:
			t.overflow.Store(true)
		}
	})
	if _, err := vw.do(ctx, []any{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", prefix, "NOLOOP"}); err != nil {
		vw.close()
		return nil, err
	}
	return t, nil
}

func (t *valkeyTracker) next(ctx context.Context, d time.Duration) (*notice, error) {
	select {
	case n := <-t.notices:
		return n, nil
	default:
	}
	if t.overflow.Swap(false) {
		return &notice{all: true}, nil
	}
	if t.pongDue {
		t.pongDue = false
		return &notice{pong: true}, nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case n := <-t.notices:
		return n, nil
	case err := <-t.closed:
		if err == nil {
			err = errors.New("padlock: the tracking connection closed")
		}
		return nil, err
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ping is answered after every push before it was handed to the hook: the
// notices it vouches for are queued when it returns.
func (t *valkeyTracker) ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := t.w.do(cctx, []any{"PING"}); err != nil {
		return err
	}
	// The PONG comes through next, after the notices queued before it.
	t.pongDue = true
	return nil
}

func (t *valkeyTracker) pops() bool { return true }

func (t *valkeyTracker) do(ctx context.Context, args []any) (any, error) { return t.w.do(ctx, args) }

func (t *valkeyTracker) close() { t.w.close() }
