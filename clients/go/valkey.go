package padlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/valkey-io/valkey-go"
)

// NewValkey is a Client on valkey-go (or rueidis, its upstream, through
// its valkey-compatible client): standalone, Sentinel or cluster. Its
// connections are the driver's dedicated ones (Dedicate), never its
// shared pipelined connection, so no wait ever holds that up.
func NewValkey(client valkey.Client) (*Client, error) {
	if client == nil {
		return nil, errors.New("padlock: a valkey.Client is needed")
	}
	return newClient(&valkeyBackend{c: client}), nil
}

type valkeyBackend struct {
	c     valkey.Client
	mu    sync.Mutex
	slots []slotRange // a cluster's, by CLUSTER SLOTS; refreshed when a key finds none
}

type slotRange struct {
	from, to int64
	addr     string
}

func (v *valkeyBackend) cluster() bool { return v.c.Mode() == valkey.ClientModeCluster }

func (v *valkeyBackend) reload(ctx context.Context) {
	if v.cluster() {
		_ = v.loadSlots(ctx)
	}
}

func (v *valkeyBackend) node(ctx context.Context, key string) (string, error) {
	if !v.cluster() {
		return "", nil
	}
	slot := int64(keySlot(key))
	for attempt := 0; attempt < 2; attempt++ {
		v.mu.Lock()
		for _, r := range v.slots {
			if slot >= r.from && slot <= r.to {
				v.mu.Unlock()
				return r.addr, nil
			}
		}
		v.mu.Unlock()
		if err := v.loadSlots(ctx); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("padlock: no node serves slot %d", slot)
}

func (v *valkeyBackend) loadSlots(ctx context.Context) error {
	got, err := v.c.Do(ctx, v.c.B().ClusterSlots().Build()).ToAny()
	if err != nil {
		return err
	}
	list, _ := got.([]any)
	var out []slotRange
	for _, e := range list {
		r, _ := e.([]any)
		if len(r) < 3 {
			continue
		}
		from, _ := asInt(r[0])
		to, _ := asInt(r[1])
		master, _ := r[2].([]any)
		if len(master) < 2 {
			continue
		}
		port, _ := asInt(master[1])
		out = append(out, slotRange{from, to, fmt.Sprintf("%v:%d", master[0], port)})
	}
	v.mu.Lock()
	v.slots = out
	v.mu.Unlock()
	return nil
}

func (v *valkeyBackend) open(ctx context.Context, node string) (wire, error) {
	c := v.c
	if node != "" {
		c = v.c.Nodes()[node]
		if c == nil {
			return nil, errors.New("padlock: unknown cluster node " + node)
		}
	}
	d, _ := c.Dedicate()
	w := &valkeyWire{d: d}
	// Named, so that CLIENT LIST tells padlock's connections from the
	// application's.
	if _, err := w.do(ctx, []any{"CLIENT", "SETNAME", "padlock"}); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

type valkeyWire struct {
	d    valkey.DedicatedClient
	once sync.Once
}

func (w *valkeyWire) command(args []any) valkey.Completed {
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = fmt.Sprint(a)
	}
	cmd := w.d.B().Arbitrary(words[0]).Args(words[1:]...)
	if isBlocking(words) {
		return cmd.Blocking()
	}
	return cmd.Build()
}

func valkeyReply(res valkey.ValkeyResult) (any, error) {
	v, err := res.ToAny()
	if valkey.IsValkeyNil(err) {
		return nil, nil
	}
	if e, ok := valkey.IsValkeyErr(err); ok {
		return nil, &ReplyError{Msg: e.Error()}
	}
	return v, err
}

func (w *valkeyWire) do(ctx context.Context, args []any) (any, error) {
	return valkeyReply(w.d.Do(ctx, w.command(args)))
}

func (w *valkeyWire) pipe(ctx context.Context, cmds [][]any) ([]any, []error) {
	all := make(valkey.Commands, len(cmds))
	for i, c := range cmds {
		all[i] = w.command(c)
	}
	replies := make([]any, len(cmds))
	errs := make([]error, len(cmds))
	for i, res := range w.d.DoMulti(ctx, all...) {
		replies[i], errs[i] = valkeyReply(res)
	}
	return replies, errs
}

// isBlocking: a command the server may hold (a BLOCK wait without a
// mailbox, BLMPOP), which valkey-go must not time out as a quick one.
func isBlocking(words []string) bool {
	if words[0] == "BLPOP" || words[0] == "BLMPOP" {
		return true
	}
	for i, w := range words {
		if w == "BLOCK" && i+1 < len(words) && !slices.Contains(words, "MAILBOX") {
			return true
		}
	}
	return false
}

// The dedicated connection goes back to the driver closed: every binding
// on it ends.
func (w *valkeyWire) close() {
	w.once.Do(w.d.Close)
}

// keySlot is the cluster slot of key: CRC16 (XMODEM) of its hash tag, or
// of the whole key, mod 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
