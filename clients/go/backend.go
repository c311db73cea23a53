package padlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// wire is one connection of padlock's own. do answers a nil reply as
// (nil, nil) and an error reply as *ReplyError; any other error is the
// connection's. close ends it, and so every KEEP binding made on it; it
// may be called while do waits, which then returns an error.
type wire interface {
	do(ctx context.Context, args []any) (any, error)
	// pipe sends several commands at once; their replies and errors, in
	// order (a connection error fails the rest).
	pipe(ctx context.Context, cmds [][]any) ([]any, []error)
	close()
}

// backend makes padlock's connections through a driver's own API.
type backend interface {
	// node names the server that serves key ("" when there is one).
	node(ctx context.Context, key string) (string, error)
	// open makes a new connection to node, never one of the
	// application's pool.
	open(ctx context.Context, node string) (wire, error)
	// cluster: a mailbox must share each request's slot there, so waits
	// take a connection of their own.
	cluster() bool
	// reload reads the cluster's slot map again (a node answered MOVED).
	reload(ctx context.Context)
}

// ---- go-redis -------------------------------------------------------------

type goRedis struct {
	single *redis.Client
	cc     *redis.ClusterClient
	mu     sync.Mutex
	nodes  map[string]*redis.Options
}

func newGoRedis(rdb redis.UniversalClient) (*goRedis, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return &goRedis{single: c}, nil
	case *redis.ClusterClient:
		return &goRedis{cc: c, nodes: map[string]*redis.Options{}}, nil
	}
	return nil, errors.New("padlock: a *redis.Client (plain or failover) or a *redis.ClusterClient is needed")
}

func (g *goRedis) cluster() bool { return g.cc != nil }

func (g *goRedis) node(ctx context.Context, key string) (string, error) {
	if g.cc == nil {
		return "", nil
	}
	c, err := g.cc.MasterForKey(ctx, key)
	if err != nil {
		return "", err
	}
	opt := c.Options()
	g.mu.Lock()
	g.nodes[opt.Addr] = opt
	g.mu.Unlock()
	return opt.Addr, nil
}

func (g *goRedis) reload(ctx context.Context) {
	if g.cc != nil {
		g.cc.ReloadState(ctx)
	}
}

func (g *goRedis) open(_ context.Context, node string) (wire, error) {
	opt, err := g.ownOptions(node)
	if err != nil {
		return nil, err
	}
	return &goRedisWire{c: redis.NewClient(opt)}, nil
}

// ownOptions are those of a connection of padlock's own to node.
func (g *goRedis) ownOptions(node string) (*redis.Options, error) {
	var base *redis.Options
	if g.cc == nil {
		base = g.single.Options()
	} else {
		g.mu.Lock()
		base = g.nodes[node]
		g.mu.Unlock()
		if base == nil {
			return nil, errors.New("padlock: unknown cluster node " + node)
		}
	}
	opt := *base
	// One connection, no pipeline pool, no retries of the driver's own
	// (padlock resends with request-ids), and no read timeout but the
	// context's: a wait's reply may come long after a driver's default 3 s.
	opt.PoolSize = 1
	opt.MaxActiveConns = 1
	opt.MinIdleConns = 0
	opt.MaxIdleConns = 1
	opt.PipelinePoolSize = -1
	opt.MaxRetries = -1
	opt.ReadTimeout = -1
	opt.WriteTimeout = -1
	opt.PoolTimeout = 30 * time.Second
	opt.ContextTimeoutEnabled = true
	opt.ConnMaxIdleTime = -1
	opt.ConnMaxLifetime = 0
	opt.Protocol = 2
	opt.DisableIdentity = true
	// Named, so that CLIENT LIST tells padlock's connections from the
	// application's (sent with the connection's handshake).
	opt.ClientName = "padlock"
	return &opt, nil
}

type goRedisWire struct{ c *redis.Client }

func (w *goRedisWire) do(ctx context.Context, args []any) (any, error) {
	v, err := w.c.Do(ctx, args...).Result()
	if err == redis.Nil {
		return nil, nil
	}
	var r redis.Error
	if err != nil && errors.As(err, &r) {
		return nil, &ReplyError{Msg: r.Error()}
	}
	return v, err
}

func (w *goRedisWire) pipe(ctx context.Context, cmds [][]any) ([]any, []error) {
	p := w.c.Pipeline()
	out := make([]*redis.Cmd, len(cmds))
	for i, c := range cmds {
		out[i] = p.Do(ctx, c...)
	}
	_, _ = p.Exec(ctx)
	replies := make([]any, len(cmds))
	errs := make([]error, len(cmds))
	for i, c := range out {
		v, err := c.Result()
		var r redis.Error
		switch {
		case err == redis.Nil:
		case err != nil && errors.As(err, &r):
			errs[i] = &ReplyError{Msg: r.Error()}
		default:
			replies[i], errs[i] = v, err
		}
	}
	return replies, errs
}

func (w *goRedisWire) close() { _ = w.c.Close() }
