package padlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// keepFloor is the shortest ttl the server keeps (3 x keep-min-interval-ms
// at its default): a renewed hold with a shorter one is refused up front.
const keepFloor = 300 * time.Millisecond

// errUnconfirmed: a grant whose lease could not be confirmed was given
// back; the caller waits again while its context lets it.
var errUnconfirmed = errors.New("padlock: a grant not confirmed held was given back")

var errTTL = errors.New("padlock: a renewed hold's ttl must be at least 300ms (the server's KEEP floor); use NoRenew() for a shorter plain lease")

// spec is what a kind says of its commands.
type spec interface {
	// id names the hold among a Client's (kind, key, mode).
	id() string
	route() string
	acquire(holder string, ttlMs, blockMs int64, blocking bool) []any
	// extends renews every lease of the hold, one command each.
	extends(holder string, ttlMs int64) [][]any
	release(holder string) []any
	releasedAll(reply any) bool
}

// binding is where a lease was bound with KEEP.
type binding struct {
	ok      bool
	epoch   uint64
	mailbox bool
}

// level is one acquire's context: cancelled with ErrLost when the hold is
// lost, with ErrReleased when that acquire is released.
type level struct {
	h      *hold
	cancel context.CancelCauseFunc
}

// hold is one holder's hold on one key (or set of keys) in a Client,
// shared by every acquire of that holder: its depth is the count the
// server keeps for it.
type hold struct {
	c      *Client
	s      spec
	holder string
	ttl    time.Duration
	o      options
	k      *keeper
	m      *mailman // nil in a cluster: waits take a connection each
	leases int      // commands a renewal takes: one per key
	// The release of a lost hold of this name the server may still count
	// (Client.leftOver), sent before the first take; guarded by mu.
	leftover []any

	mu sync.Mutex // one operation at a time: acquire, release, renewal

	st         sync.Mutex // guards what follows
	dead       bool       // out of the Client's registry
	depth      int
	levels     []*level
	leaseUntil time.Duration // mono: the lease cannot run out before
	heldSince  time.Duration
	bound      binding
	lossIDs    []string
	mailedLost string
	lostFlag   bool
	unsure     bool // a renewal failed: the lease may still be bound
	reply      any  // the first grant's reply: the fence(s), the permits
	gen        int
	written    uint64 // the keeper epoch this hold's latest command went out on
}

func (h *hold) ttlMs() int64 { return h.ttl.Milliseconds() }

func (h *hold) interval() time.Duration { return max(h.ttl/3, time.Millisecond) }

// deadlineOf is ctx's deadline in mono time (0: none).
func deadlineOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(mono()+time.Until(d), 1)
	}
	return 0
}

// acquire takes one more hold, waiting (blocking) until ctx ends. A nil
// reply: not acquired.
func (h *hold) acquire(ctx context.Context, blocking bool) (any, error) {
	if h.o.keep && h.ttl < keepFloor {
		return nil, errTTL
	}
	start := mono()
	deadline, p := deadlineOf(ctx), phaseAcquire
	if !blocking {
		deadline, p = start+h.ttl, phaseTry
	}
	make := func(left time.Duration) []any {
		block := int64(0)
		if left > 0 {
			block = max(left.Milliseconds(), 1)
		}
		args := h.s.acquire(h.holder, h.ttlMs(), block, blocking)
		if h.o.keep {
			args = append(args, "KEEP")
		}
		return args
	}
	reply, b, err := h.send(ctx, make, p, deadline, blocking)
	if err == nil && reply == nil && blocking && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil || reply == nil {
		h.st.Lock()
		if h.depth == 0 {
			h.forgetLossesLocked()
		}
		h.st.Unlock()
		if replyCode(err) == "TRYAGAIN" && blocking {
			return nil, nil // the restart grace outlasted the wait
		}
		return nil, translate(err)
	}
	h.st.Lock()
	h.leaseUntil = max(h.leaseUntil, start+h.ttl)
	h.depth++
	first := h.depth == 1
	if first {
		h.heldSince, h.lostFlag, h.mailedLost, h.reply = start, false, "", reply
	}
	if b.ok {
		h.bound = b
	}
	h.st.Unlock()
	if first && h.o.renews {
		h.c.w.add(h, mono()+h.interval(), h.nextGen())
	}
	// Granted after a wait: bound now (KEEP), and the lease known from a
	// send time. A grant bound while queued is known to live only as far
	// as the mailbox was last read: after a wait that outlived that, it
	// is renewed too.
	// Tried for a ttl (a second at least) within ctx's deadline, not just
	// until the lease's lower bound, long past after a wait. A grant it
	// finds gone, or cannot confirm, is given back, never answered.
	renewed := h.o.renews && blocking && (!b.ok || !h.held()) && (h.o.keep || h.leaseLeft() < h.ttl*2/3)
	if renewed {
		until := mono() + max(h.ttl, time.Second)
		if d := deadlineOf(ctx); d > 0 {
			until = min(until, d)
		}
		if !h.renewUntil(until) && first && !h.held() {
			_ = h.release(nil)
			return nil, errUnconfirmed
		}
	}
	if first && h.o.replicas > 0 {
		if ok, why := h.grantReplicated(blocking && !renewed); !ok {
			return nil, fmt.Errorf("%w: %s", ErrNotReplicated, why)
		}
	}
	return reply, nil
}

// send is one changing request with one request-id, sent until answered
// or the deadline (mono; 0: none) passes.
func (h *hold) send(ctx context.Context, make func(time.Duration) []any, p phase, deadline time.Duration, wait bool) (any, binding, error) {
	rid := requestID()
	moves := 0
	for attempt := 0; ; attempt++ {
		left := time.Duration(0)
		if deadline > 0 {
			left = max(deadline-mono(), time.Millisecond)
		}
		limit := max(left, 50*time.Millisecond)
		if deadline == 0 {
			limit = 30 * time.Second
		}
		reply, b, err := h.call(ctx, withID(make(left), rid), limit, wait)
		if err == nil && attempt > 0 {
			// A resend may be answered from the server's memory of an
			// earlier sending, which bound nothing (KEEP) here.
			b.ok = false
		}
		moved := replyCode(err) == "MOVED" && h.c.b.cluster() && moves < maxMoves
		if moved {
			// The key's slot moved to another node (a resharding): the
			// request goes there, with its id (the ids of what applied
			// here moved with the slot).
			moves++
			if rerr := h.reroute(ctx); rerr != nil {
				return nil, binding{}, err
			}
		}
		if err == nil || ctx.Err() != nil || (!moved && judge(err, p) != resend) {
			return reply, b, err
		}
		d, ok := pause(attempt, time.Now(), wallOf(deadline))
		if !ok {
			return nil, binding{}, err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, binding{}, ctx.Err()
		case <-t.C:
		}
	}
}

// maxMoves is how many MOVED redirects one request follows (a map read
// while the cluster settles may still name the old owner).
const maxMoves = 8

// reroute points the hold at its key's current node: the cluster's map is
// read again, and the keeper and mailman are that node's (caller holds mu).
func (h *hold) reroute(ctx context.Context) error {
	h.c.b.reload(ctx)
	k, m, err := h.c.nodeOf(ctx, h.s.route())
	if err != nil {
		return err
	}
	h.st.Lock()
	// Nothing is bound on the new owner until a KEEP request binds it, and
	// losses are heard there.
	h.forgetLossesLocked()
	h.k, h.m = k, m
	h.st.Unlock()
	return nil
}

func wallOf(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Now().Add(d - mono())
}

// call runs one command: a wait through the mailbox, or on a connection
// of its own in a cluster; anything else on the keeper, whose KEEP
// bindings it then carries.
func (h *hold) call(ctx context.Context, args []any, limit time.Duration, wait bool) (any, binding, error) {
	keep, rid := index(args, "KEEP") >= 0, argAfter(args, "ID")
	if h.m != nil && keep && rid != "" && (wait || index(args, "MAILBOX") >= 0) {
		// Watched before it is sent: a loss is never mailed to nobody.
		h.watchLoss(rid)
	}
	if wait && h.m != nil {
		reply, epoch, onKeeper, err := mailWait(ctx, h.m, args, h.s.release(h.holder))
		return reply, binding{ok: err == nil && onKeeper && keep && reply != nil, epoch: epoch, mailbox: true}, err
	}
	if !wait {
		reply, epoch, err := h.k.call(args, limit)
		h.st.Lock()
		h.written = epoch
		h.st.Unlock()
		return reply, binding{ok: err == nil && keep, epoch: epoch, mailbox: index(args, "MAILBOX") >= 0}, err
	}
	reply, err := h.waitAlone(ctx, args, limit)
	return reply, binding{}, err
}

// waitAlone is a BLOCK wait on a connection made for it (a cluster). A
// caller that stops waiting closes it, which drops the server's wait; a
// grant that won the race is found by a resend and given back.
func (h *hold) waitAlone(ctx context.Context, args []any, limit time.Duration) (any, error) {
	w, err := h.c.b.open(ctx, h.k.node)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, w.close)
	wctx, cancel := context.WithTimeout(context.Background(), limit+callTimeout)
	reply, err := w.do(wctx, args)
	cancel()
	stopped := !stop()
	w.close()
	if stopped || ctx.Err() != nil {
		probe(h.k, args, h.s.release(h.holder))
		return nil, ctx.Err()
	}
	return reply, err
}

func (h *hold) watchLoss(rid string) {
	h.m.watch(rid, h, h.interval())
	h.st.Lock()
	defer h.st.Unlock()
	h.lossIDs = append(h.lossIDs, rid)
	// Only the latest bindings' ids can still be mailed (those of the
	// round before stay while a resend may be under way).
	if keep := 2 * h.leases; len(h.lossIDs) > keep {
		h.m.unwatch(h.lossIDs[:len(h.lossIDs)-keep])
		h.lossIDs = append([]string{}, h.lossIDs[len(h.lossIDs)-keep:]...)
	}
}

func (h *hold) forgetLossesLocked() {
	if h.m != nil {
		h.m.unwatch(h.lossIDs)
	}
	h.lossIDs = nil
	h.bound = binding{}
}

// heardLost: the server mailed this hold's loss; the watcher ends it now.
func (h *hold) heardLost(why string) {
	h.st.Lock()
	if h.depth == 0 || h.dead {
		h.st.Unlock()
		return
	}
	h.mailedLost = why
	gen := h.gen
	h.st.Unlock()
	h.c.w.add(h, mono(), gen)
}

func (h *hold) nextGen() int {
	h.st.Lock()
	defer h.st.Unlock()
	h.gen++
	return h.gen
}

// leaseLeft is how long the lease cannot run out: from the last answered
// acquire or renewal's send time, or, while bound with the mailbox on the
// live keeper, from when that binding was last known to live.
func (h *hold) leaseLeft() time.Duration {
	h.st.Lock()
	defer h.st.Unlock()
	return h.leaseUntilLocked() - mono()
}

func (h *hold) leaseUntilLocked() time.Duration {
	until := h.leaseUntil
	if h.bound.ok && h.bound.mailbox && h.m != nil && h.bound.epoch == h.k.epoch.Load() {
		until = max(until, h.m.fresh()+h.ttl)
	}
	return until
}

// held: the lease cannot have run out, and no loss was heard.
func (h *hold) held() bool {
	h.st.Lock()
	defer h.st.Unlock()
	return h.depth > 0 && !h.lostFlag && h.mailedLost == "" && mono() < h.leaseUntilLocked()
}

// release gives back one hold. ErrNotHeld when it was lost or nothing is
// held; the connection's error once the release could not get through
// before the lease may have run out (the keeper is then replaced, and the
// server frees the key at the lease's end).
func (h *hold) release(lv *level) error {
	h.st.Lock()
	depth, wasLost := h.depth, h.lostFlag
	h.st.Unlock()
	if depth == 0 {
		if wasLost {
			return errLostHold
		}
		return ErrNotHeld
	}
	deadline := max(mono()+h.leaseLeft(), mono()+time.Second)
	args := h.s.release(h.holder)
	reply, _, err := h.send(context.Background(), func(time.Duration) []any { return args }, phaseRelease, deadline, false)
	if err != nil {
		v := judge(translate(err), phaseRelease)
		h.end(v == lost, ErrLost)
		if v == lost {
			return fmt.Errorf("%w: %s", ErrNotHeld, translate(err))
		}
		return err
	}
	h.st.Lock()
	h.depth--
	rest := h.depth
	h.dropLevelLocked(lv)
	h.st.Unlock()
	if h.s.releasedAll(reply) {
		if h.o.replicas > 0 {
			if ok, why := h.replicated(false); !ok {
				slog.Warn("padlock: released, but short of its replicas", "key", h.s.route(), "holder", h.holder, "why", why)
			}
		}
		h.end(true, ErrReleased)
	} else if rest == 0 {
		h.releaseRest()
	}
	return nil
}

func (h *hold) dropLevelLocked(lv *level) {
	for i, l := range h.levels {
		if l == lv || (lv == nil && i == len(h.levels)-1) {
			l.cancel(ErrReleased)
			h.levels = append(h.levels[:i], h.levels[i+1:]...)
			return
		}
	}
}

// end: the hold is over. Nothing of it stays bound (clean: the server
// said so, or it released; otherwise the keeper is replaced), its
// contexts are cancelled with why, and it leaves the Client's registry.
func (h *hold) end(clean bool, why error) {
	h.st.Lock()
	left := !clean && h.depth > 0
	h.depth = 0
	h.gen++
	h.forgetLossesLocked()
	levels := h.levels
	h.levels = nil
	h.dead = true
	h.st.Unlock()
	if left {
		h.c.leftOver(holdName(h.s, h.holder), h.s.release(h.holder), h.ttl)
	}
	h.c.forget(h)
	for _, l := range levels {
		l.cancel(why)
	}
	if !clean {
		h.k.reset()
	}
}
