package padlock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mailboxes in a cluster. A mailbox must share its request's slot, and
// BLMPOP cannot wait on keys of two slots, so there a Client keeps one
// mailbox per slot in use (named with a hash tag of that slot) and hears of
// writes to any of them through the server's client tracking (CLIENT
// TRACKING ... BCAST PREFIX) on one subscribed connection per node; the
// keeper then pops the mailbox named. One connection waits for any number
// of slots.

// invalidations is the channel tracking notices arrive on (RESP2).
const invalidations = "__redis__:invalidate"

var (
	slotTagsOnce sync.Once
	slotTags     []string
)

// slotTag is a short alphanumeric hash tag whose slot is slot, found once
// for all slots by growing candidates a character at a time.
func slotTag(slot uint16) string {
	slotTagsOnce.Do(func() {
		const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		tags := make([]string, 16384)
		left := len(tags)
		level := []string{""}
		for left > 0 {
			var grown []string
			for _, p := range level {
				for i := 0; i < len(alphabet); i++ {
					w := p + alphabet[i:i+1]
					grown = append(grown, w)
					if s := keySlot(w); tags[s] == "" {
						tags[s] = w
						left--
					}
				}
			}
			level = grown
		}
		slotTags = tags
	})
	return slotTags[slot]
}

// notice is what a tracking connection heard: the keys named (all: every
// key, a flush), or the answer to a ping.
type notice struct {
	keys []string
	all  bool
	pong bool
}

// tracker is a subscribed connection of padlock's own that hears of writes
// to keys under a prefix on one node.
type tracker interface {
	// next waits up to d for a notice; none within d is (nil, nil).
	next(ctx context.Context, d time.Duration) (*notice, error)
	ping(ctx context.Context) error
	// pops: the connection runs other commands too (RESP3, NOLOOP), so
	// mailboxes are popped on it (do); otherwise on the keeper.
	pops() bool
	do(ctx context.Context, args []any) (any, error)
	close()
}

// tracking is a backend that can track (go-redis on RESP2, subscribed;
// valkey-go on RESP3, its invalidation hook).
type tracking interface {
	track(ctx context.Context, node, prefix string) (tracker, error)
}

func (g *goRedis) track(ctx context.Context, node, prefix string) (tracker, error) {
	opt, err := g.ownOptions(node)
	if err != nil {
		return nil, err
	}
	t := &goRedisTracker{}
	// Each connection the subscription makes tracks on itself: a notice
	// goes to the connection that asked, subscribed to the channel.
	opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		t.connects.Add(1)
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		return cn.Do(ctx, "CLIENT", "TRACKING", "ON", "REDIRECT", id, "BCAST", "PREFIX", prefix).Err()
	}
	t.c = redis.NewClient(opt)
	t.ps = t.c.Subscribe(ctx, invalidations)
	if _, err := t.ps.ReceiveTimeout(ctx, callTimeout); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

type goRedisTracker struct {
	c        *redis.Client
	ps       *redis.PubSub
	connects atomic.Int32
}

// errResubscribed: the driver made a new connection on its own; posts made
// in between may not have been heard of.
var errResubscribed = errors.New("padlock: the tracking connection was replaced")

func (t *goRedisTracker) next(ctx context.Context, d time.Duration) (*notice, error) {
	got, err := t.ps.ReceiveTimeout(ctx, d)
	if t.connects.Load() != 1 {
		return nil, errResubscribed
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch m := got.(type) {
	case *redis.Message:
		if m.Payload == "" && m.PayloadSlice == nil {
			return &notice{all: true}, nil
		}
		if m.PayloadSlice == nil {
			return &notice{keys: []string{m.Payload}}, nil
		}
		return &notice{keys: m.PayloadSlice}, nil
	case *redis.Pong:
		return &notice{pong: true}, nil
	}
	return &notice{}, nil
}

func (t *goRedisTracker) ping(ctx context.Context) error { return t.ps.Ping(ctx) }

func (t *goRedisTracker) pops() bool { return false }

func (t *goRedisTracker) do(context.Context, []any) (any, error) {
	return nil, errors.New("padlock: a subscribed connection runs no commands")
}

func (t *goRedisTracker) close() {
	_ = t.ps.Close()
	_ = t.c.Close()
}

// ---- the mailman's side ---------------------------------------------------

// boxFor is the mailbox of a request on key: the Client's, or in a cluster
// that of key's slot.
func (m *mailman) boxFor(key string) string {
	if m.tr == nil {
		return m.box
	}
	name := m.box + ":{" + slotTag(keySlot(key)) + "}"
	m.mu.Lock()
	m.boxes[name] = true
	m.mu.Unlock()
	return name
}

// hear is one step of a cluster's mailman: it hands on what the mailboxes
// named by notices hold, and pings the tracking connection once per poll. A
// pong comes after the notices of every post made before the previous ping
// was served (they go out at the end of that event-loop turn), so all of
// those were handed on: clearAt is that ping's send time.
func (m *mailman) hear(t *tracker, poll time.Duration) error {
	ctx := context.Background()
	if *t == nil {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		sent := mono()
		nt, err := m.tr.track(cctx, m.k.node, m.box+":")
		cancel()
		if err != nil {
			return err
		}
		*t = nt
		// Posts made before the subscription took are popped now; any
		// later one is heard of.
		if err := m.drain(nt, m.named(&notice{all: true})...); err != nil {
			return err
		}
		m.raise(sent)
		m.pinged = sent
	}
	if wait := time.Duration(m.pinged) + poll - mono(); wait > 0 {
		n, err := (*t).next(ctx, wait)
		if err != nil || n == nil {
			return err
		}
		return m.drain(*t, m.named(n)...)
	}
	sent := mono()
	if err := (*t).ping(ctx); err != nil {
		return err
	}
	for {
		n, err := (*t).next(ctx, callTimeout)
		if err != nil {
			return err
		}
		if n == nil {
			return errTimeout
		}
		if n.pong {
			break
		}
		if err := m.drain(*t, m.named(n)...); err != nil {
			return err
		}
	}
	m.raise(m.pinged)
	m.pinged = sent
	if time.Duration(m.k.aliveAt.Load()) < mono()-poll {
		m.k.ping(callTimeout)
	}
	return nil
}

// named is the mailboxes of this Client a notice names.
func (m *mailman) named(n *notice) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if n.all {
		for b := range m.boxes {
			out = append(out, b)
		}
		return out
	}
	for _, k := range n.keys {
		if m.boxes[k] {
			out = append(out, k)
		}
	}
	return out
}

// drain pops each mailbox until it is empty: on t if it pops, else on the
// keeper.
func (m *mailman) drain(t tracker, boxes ...string) error {
	for _, b := range boxes {
		for {
			cmd := []any{"LMPOP", "1", b, "LEFT", "COUNT", drain}
			var got any
			var err error
			if t.pops() {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				got, err = t.do(ctx, cmd)
				cancel()
			} else {
				got, _, err = m.k.call(cmd, callTimeout)
			}
			if err != nil {
				return err
			}
			var elements []any
			if pair, ok := got.([]any); ok && len(pair) == 2 {
				elements, _ = pair[1].([]any)
			}
			m.handOut(elements)
			if len(elements) < drain {
				break
			}
		}
	}
	return nil
}

func (m *mailman) raise(at time.Duration) {
	if int64(at) > m.clearAt.Load() {
		m.clearAt.Store(int64(at))
	}
}
