package padlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client makes padlock's locks on one deployment (a server, a Sentinel
// group or a cluster). Every hold and wait of a Client shares, per node,
// two connections of padlock's own (never the application's pool): the
// keeper, which carries every command and KEEP binding, and the mailbox
// reader. Safe for concurrent use; make one per deployment and keep it.
type Client struct {
	b  backend
	w  *watcher
	mu sync.Mutex
	// keepers and mailmen by node; holds by (kind, key, holder).
	keepers map[string]*keeper
	mailmen map[string]*mailman
	holds   map[string]*hold
	// The release of a hold lost without the server saying so (a renewal
	// or release that got no answer), by hold name: the server may still
	// count it, and a new take by its holder would reenter it (its old
	// fence, a count nobody sees). See clearLeftover.
	leftovers map[string]leftover
}

// New is a Client on go-redis: a *redis.Client (plain, or the failover
// client of a Sentinel group) or a *redis.ClusterClient. Its connections
// are made with the client's options (address, password, TLS, database),
// with the driver's retries and read timeout off: padlock resends with
// request-ids, and a wait may take longer than any default timeout.
func New(rdb redis.UniversalClient) (*Client, error) {
	b, err := newGoRedis(rdb)
	if err != nil {
		return nil, err
	}
	return newClient(b), nil
}

func newClient(b backend) *Client {
	return &Client{b: b, w: newWatcher(), keepers: map[string]*keeper{},
		mailmen: map[string]*mailman{}, holds: map[string]*hold{}, leftovers: map[string]leftover{}}
}

// Close ends the Client's connections, and so every KEEP binding: their
// leases run out one ttl later. Holds still held are not released.
func (c *Client) Close() error {
	c.w.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.keepers {
		k.reset()
	}
	return nil
}

// Option sets how a hold's lease is kept.
type Option func(*options)

type options struct {
	ttl            time.Duration
	renews         bool
	keep           bool
	maxHold        time.Duration
	replicas       int // Replicas: 0 for none
	replicaTimeout time.Duration
	replicaWarn    bool
	replicaAOF     bool
}

func settle(opts []Option) options {
	o := options{ttl: 30 * time.Second, renews: true, keep: true}
	for _, f := range opts {
		f(&o)
	}
	// A lease the server keeps (KEEP) would outlive MaxHold.
	o.keep = o.keep && o.renews && o.maxHold == 0
	return o
}

// TTL is how long a hold outlives its Client's connection (default 30 s):
// the lease the server gives it, kept while the connection lives.
func TTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// NoRenew makes a plain lease that runs out one ttl after the acquire,
// whatever the holder does (as redsync and bsm/redislock do).
func NoRenew() Option { return func(o *options) { o.renews = false } }

// MaxHold renews the lease, but never past d of holding: then the lease
// runs out and the hold is lost like any other.
func MaxHold(d time.Duration) Option { return func(o *options) { o.maxHold = d } }

// nodeOf is the keeper and mailman of the node that serves key.
func (c *Client) nodeOf(ctx context.Context, key string) (*keeper, *mailman, error) {
	node, err := c.b.node(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keepers[node]
	if k == nil {
		k = newKeeper(c.b, node)
		c.keepers[node] = k
	}
	tr, _ := c.b.(tracking)
	if c.b.cluster() && tr == nil {
		return k, nil, nil // a backend that cannot track: a connection per wait
	}
	if !c.b.cluster() {
		tr = nil
	}
	m := c.mailmen[node]
	if m == nil {
		m = newMailman(c.b, k, tr)
		c.mailmen[node] = m
	}
	return k, m, nil
}

// holdName is the registry's name of holder's hold on s.
func holdName(s spec, holder string) string { return s.id() + "\x00" + holder }

// holdFor is the live hold of holder on s, locked (its mu), made when
// there is none. A new hold takes what a lost hold of its name left over.
func (c *Client) holdFor(ctx context.Context, s spec, holder string, o options) (*hold, error) {
	k, m, err := c.nodeOf(ctx, s.route())
	if err != nil {
		return nil, err
	}
	name := holdName(s, holder)
	for {
		c.mu.Lock()
		h := c.holds[name]
		if h == nil {
			h = &hold{c: c, s: s, holder: holder, ttl: o.ttl, o: o, k: k, m: m,
				leases: max(len(s.extends(holder, 1)), 1)}
			if l, ok := c.leftovers[name]; ok {
				delete(c.leftovers, name)
				if l.until > mono() {
					h.leftover = l.release
				}
			}
			c.holds[name] = h
		}
		c.mu.Unlock()
		h.mu.Lock()
		h.st.Lock()
		dead := h.dead
		h.st.Unlock()
		if !dead {
			return h, nil
		}
		h.mu.Unlock()
	}
}

func (c *Client) forget(h *hold) {
	name := holdName(h.s, h.holder)
	c.mu.Lock()
	if c.holds[name] == h {
		delete(c.holds, name)
	}
	c.mu.Unlock()
}

// acquire is what every kind's acquire does: the hold of ctx's holder on
// s, one more level of it, and the context that stands for that level.
func (c *Client) acquire(ctx context.Context, s spec, o options, blocking bool) (context.Context, any, error) {
	for {
		lctx, reply, err := c.acquireOnce(ctx, s, o, blocking)
		if !errors.Is(err, errUnconfirmed) {
			return lctx, reply, err
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
}

func (c *Client) acquireOnce(ctx context.Context, s spec, o options, blocking bool) (context.Context, any, error) {
	holder := holderOf(ctx)
	h, err := c.holdFor(ctx, s, holder, o)
	if err != nil {
		return nil, nil, err
	}
	defer h.mu.Unlock()
	if h.leftover != nil {
		h.clearLeftover()
	}
	reply, err := h.acquire(ctx, blocking)
	if err != nil || reply == nil {
		h.st.Lock()
		idle := h.depth == 0
		h.st.Unlock()
		if idle {
			h.end(true, ErrReleased)
		}
		return nil, nil, err
	}
	lctx, cancel := context.WithCancelCause(WithHolder(ctx, holder))
	lv := &level{h: h, cancel: cancel}
	h.st.Lock()
	h.levels = append(h.levels, lv)
	h.st.Unlock()
	return context.WithValue(lctx, levelKey{}, lv), reply, nil
}

// release gives back the level ctx stands for (or, for a context that only
// carries the holder, the latest one).
func (c *Client) release(ctx context.Context, s spec) error {
	h := c.heldBy(ctx, s)
	if h == nil {
		if lv, ok := ctx.Value(levelKey{}).(*level); ok && lv.h.s.id() == s.id() && lv.h.isLost() {
			return errLostHold
		}
		return ErrNotHeld
	}
	defer h.mu.Unlock()
	lv, _ := ctx.Value(levelKey{}).(*level)
	if lv != nil && lv.h != h {
		lv = nil
	}
	return h.release(lv)
}

// heldBy is the live hold of ctx's holder on s, locked, or nil.
func (c *Client) heldBy(ctx context.Context, s spec) *hold {
	holder, ok := HolderFrom(ctx)
	if !ok {
		return nil
	}
	c.mu.Lock()
	h := c.holds[holdName(s, holder)]
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	h.st.Lock()
	live := !h.dead && h.depth > 0
	h.st.Unlock()
	if !live {
		h.mu.Unlock()
		return nil
	}
	return h
}

// peek is the live hold of ctx's holder on s, not locked, or nil.
func (c *Client) peek(ctx context.Context, s spec) *hold {
	holder, ok := HolderFrom(ctx)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds[holdName(s, holder)]
}

func (h *hold) isLost() bool {
	h.st.Lock()
	defer h.st.Unlock()
	return h.lostFlag
}
