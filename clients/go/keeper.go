package padlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

var epochStart = time.Now()

// mono is monotonic time since the package loaded.
func mono() time.Duration { return time.Since(epochStart) }

const never = time.Duration(-1 << 62)

// callTimeout is the longest one command may take on a keeper.
const callTimeout = 5 * time.Second

// keeper is the connection every hold and wait of a Client on one node
// shares: it carries their acquires, renewals, reads and releases, and
// their KEEP bindings. Commands run one at a time.
type keeper struct {
	b    backend
	node string
	mu   sync.Mutex // one command (or pipeline) at a time; guards w and id
	w    wire
	id   string
	// The commands waiting to go (qmu guards them), and whether a
	// goroutine is sending.
	qmu     sync.Mutex
	queue   []*request
	sending bool
	// epoch is bumped whenever the connection goes: bindings made on an
	// earlier one are gone.
	epoch atomic.Uint64
	// aliveAt is the send time (mono) of the latest CLIENT ID answered on
	// this epoch's connection, unchanged: every binding on it lived then.
	aliveAt atomic.Int64
	// gone is closed when this epoch's connection goes (guarded by mu):
	// the waits queued on it hear at once, with no timer of their own.
	gone chan struct{}
}

func newKeeper(b backend, node string) *keeper {
	k := &keeper{b: b, node: node, gone: make(chan struct{})}
	k.aliveAt.Store(int64(never))
	return k
}

// call sends args after the commands before it, within limit; the epoch
// it went out on comes with the reply. A connection that failed or went
// silent is replaced (its holds bind again on their next round). No
// caller's context reaches it: a command cut halfway would end every
// binding on the connection.
//
// Commands asked for while one is out go together as one pipeline when it
// is back: a release never waits behind other goroutines' round trips one
// by one (8 goroutines on one lock: the hand-off is one round trip).
func (k *keeper) call(args []any, limit time.Duration) (any, uint64, error) {
	r := &request{args: args, limit: limit, done: make(chan result, 1)}
	k.qmu.Lock()
	k.queue = append(k.queue, r)
	if k.sending {
		k.qmu.Unlock()
		got := <-r.done
		return got.reply, got.epoch, got.err
	}
	k.sending = true
	k.qmu.Unlock()
	k.sendBatch()
	// Asked for meanwhile: sent on by a goroutine of their own, so this
	// caller has its reply now.
	k.qmu.Lock()
	if len(k.queue) > 0 {
		go k.flush()
	} else {
		k.sending = false
	}
	k.qmu.Unlock()
	got := <-r.done
	return got.reply, got.epoch, got.err
}

// request is one command waiting for the keeper, and where its result goes.
type request struct {
	args  []any
	limit time.Duration
	done  chan result
}

type result struct {
	reply any
	epoch uint64
	err   error
}

// flush sends what is queued until nothing is.
func (k *keeper) flush() {
	for {
		k.qmu.Lock()
		if len(k.queue) == 0 {
			k.sending = false
			k.qmu.Unlock()
			return
		}
		k.qmu.Unlock()
		k.sendBatch()
	}
}

// sendBatch sends everything queued, in order, as one pipeline (one
// command: a plain call), within the longest of their limits.
func (k *keeper) sendBatch() {
	k.qmu.Lock()
	batch := k.queue
	k.queue = nil
	k.qmu.Unlock()
	limit := time.Duration(0)
	for _, r := range batch {
		limit = max(limit, r.limit)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := k.openLocked(cctx); err != nil {
		if cctx.Err() != nil {
			err = fmt.Errorf("%w (not connected within %v)", errTimeout, limit)
		}
		for _, r := range batch {
			r.done <- result{epoch: k.epoch.Load(), err: err}
		}
		return
	}
	epoch := k.epoch.Load()
	replies := make([]any, len(batch))
	errs := make([]error, len(batch))
	if len(batch) == 1 {
		replies[0], errs[0] = k.w.do(cctx, batch[0].args)
	} else {
		all := make([][]any, len(batch))
		for i, r := range batch {
			all[i] = r.args
		}
		replies, errs = k.w.pipe(cctx, all)
	}
	failed := false
	for i, r := range batch {
		err := errs[i]
		if err != nil && !isReply(err) {
			failed = true
			if cctx.Err() != nil {
				err = fmt.Errorf("%w (%v on %v)", errTimeout, limit, r.args[0])
			}
		}
		r.done <- result{reply: replies[i], epoch: epoch, err: err}
	}
	if failed {
		k.resetLocked()
	}
}

func (k *keeper) openLocked(ctx context.Context) error {
	if k.w != nil {
		return nil
	}
	w, err := k.b.open(ctx, k.node)
	if err != nil {
		return err
	}
	// A driver may reconnect on its own: the connection's id tells.
	id, err := w.do(ctx, []any{"CLIENT", "ID"})
	if err != nil {
		w.close()
		return err
	}
	k.w, k.id = w, fmt.Sprint(id)
	return nil
}

// ping is the liveness check of every binding on the connection: an
// unchanged CLIENT ID answered within limit moves aliveAt.
func (k *keeper) ping(limit time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.w == nil {
		return // none open, and none opened for it
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	sent := mono()
	id, err := k.w.do(ctx, []any{"CLIENT", "ID"})
	switch {
	case err != nil:
		k.resetLocked()
	case fmt.Sprint(id) != k.id:
		k.nextEpochLocked()
		k.id = fmt.Sprint(id)
	default:
		if int64(sent) > k.aliveAt.Load() {
			k.aliveAt.Store(int64(sent))
		}
	}
}

// reset closes the connection: every binding on it ends.
func (k *keeper) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.resetLocked()
}

// goneCh is closed once the current epoch's connection goes.
func (k *keeper) goneCh() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gone
}

func (k *keeper) nextEpochLocked() {
	k.epoch.Add(1)
	k.aliveAt.Store(int64(never))
	close(k.gone)
	k.gone = make(chan struct{})
}

func (k *keeper) resetLocked() {
	k.nextEpochLocked()
	if k.w != nil {
		k.w.close()
		k.w = nil
	}
}
