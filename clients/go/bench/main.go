// The Go client against redsync v4 and bsm/redislock, side by side on one
// server (make bench, scripts/bench/go-bench.sh): 8 goroutines on one lock
// with 1 ms of work, and the uncontended acquire+release round trip. It
// prints Markdown tables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	padlock "github.com/padlock-redis/padlock/clients/go"
)

// locker is one library's lock, as the benchmark drives it.
type locker interface {
	lock(ctx context.Context) (unlock func(), err error)
}

type padlockLocker struct{ l *padlock.Lock }

func (p padlockLocker) lock(ctx context.Context) (func(), error) {
	held, err := p.l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return func() { _ = p.l.Release(held) }, nil
}

type redsyncLocker struct{ rs *redsync.Redsync }

func (r redsyncLocker) lock(ctx context.Context) (func(), error) {
	// Its defaults: 32 tries, 50-250 ms apart.
	m := r.rs.NewMutex("bench:redsync", redsync.WithExpiry(8*time.Second))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() { _, _ = m.Unlock() }, nil
}

type redislockLocker struct{ c *redislock.Client }

func (r redislockLocker) lock(ctx context.Context) (func(), error) {
	// Retried every 10 ms until ctx ends, as its README's blocking example.
	l, err := r.c.Obtain(ctx, "bench:redislock", 8*time.Second,
		&redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Release(context.Background()) }, nil
}

type result struct {
	name          string
	sections      float64
	fairness      float64
	p50, p99      time.Duration
	handOff, work time.Duration
	failed        int
}

// tally is one library's contended run, summed over its slices.
type tally struct {
	counts []int
	waits  []time.Duration
	// From a release's start to the next holder running (the lock's own
	// part of a section), and how long the 1 ms of work took.
	handOffs, works []time.Duration
	failed          int
	elapsed         time.Duration
}

// contended runs workers goroutines on l for d, adding to t: each takes
// the lock, works 1 ms and releases, until d has passed.
func contended(name string, l locker, t *tally, d time.Duration, work func()) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var released time.Time // the latest release's start
	start := time.Now()
	for w := range t.counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				begin := time.Now()
				unlock, err := l.lock(ctx)
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, padlock.ErrNotAcquired) {
						mu.Lock()
						if t.failed == 0 && os.Getenv("PADLOCK_BENCH_DEBUG") != "" {
							fmt.Fprintln(os.Stderr, name, "failed:", err)
						}
						t.failed++
						mu.Unlock()
					}
					continue
				}
				got := time.Now()
				waited := got.Sub(begin)
				work()
				done := time.Now()
				mu.Lock()
				if !released.IsZero() {
					t.handOffs = append(t.handOffs, got.Sub(released))
				}
				released = done
				mu.Unlock()
				unlock()
				mu.Lock()
				t.counts[w]++
				t.waits = append(t.waits, waited)
				t.works = append(t.works, done.Sub(got))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.elapsed += time.Since(start)
}

// works are the kinds of 1 ms of work a section may do. time.Sleep's
// length depends on what the rest of the process did meanwhile (see
// timerProbe); a nanosleep blocks the thread for its time whatever the
// runtime does; spin keeps a core busy.
var works = map[string]func(){
	"sleep": func() { time.Sleep(time.Millisecond) },
	"nanosleep": func() {
		ts := syscall.NsecToTimespec(int64(time.Millisecond))
		_ = syscall.Nanosleep(&ts, nil)
	},
	"spin": func() {
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
		}
	},
}

// result is what a tally says.
func (t *tally) result(name string) result {
	total, least, most := 0, t.counts[0], t.counts[0]
	for _, c := range t.counts {
		total += c
		least, most = min(least, c), max(most, c)
	}
	fair := 0.0
	if most > 0 {
		fair = float64(least) / float64(most)
	}
	return result{name: name, sections: float64(total) / t.elapsed.Seconds(), fairness: fair,
		p50: percentile(t.waits, 0.5), p99: percentile(t.waits, 0.99), failed: t.failed,
		handOff: percentile(t.handOffs, 0.5), work: percentile(t.works, 0.5)}
}

// percentile sorts d and returns its p-th.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// uncontended times n acquire + release pairs of every locker, one
// locker's pair after another's in turn (so that the loopback round trip's
// drift from minute to minute falls on all alike), after 200 of each
// unmeasured; the median pair of each, and how many failed.
func uncontended(ls []locker, n int) ([]time.Duration, []int) {
	took := make([][]time.Duration, len(ls))
	failed := make([]int, len(ls))
	for round := -200; round < n; round++ {
		// Each round starts with the next one: no library always
		// follows the same other.
		for k := range ls {
			i := (k + round + 200) % len(ls)
			l := ls[i]
			start := time.Now()
			unlock, err := l.lock(context.Background())
			if err != nil {
				failed[i]++
				continue
			}
			unlock()
			if round >= 0 {
				took[i] = append(took[i], time.Since(start))
			}
		}
	}
	medians := make([]time.Duration, len(ls))
	for i := range ls {
		medians[i] = percentile(took[i], 0.5)
	}
	return medians, failed
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "server with the module")
	seconds := flag.Int("seconds", 10, "seconds per contended run")
	workKinds := flag.String("work", "sleep", "the 1 ms of work, one contended run each (a comma-separated list): sleep (time.Sleep), nanosleep (the thread blocks, as in a blocking call) or spin (CPU)")
	rounds := flag.Int("rounds", 10, "slices each library's contended run is cut into, run round robin")
	holds := flag.Int("holdcost", 0, "instead: what n holds and n waiters cost (scripts/bench/holdcost.py)")
	probe := flag.Bool("timerprobe", false, "instead: how a 1 ms sleep lengthens when other goroutines make round trips")
	flag.Parse()
	if *holds > 0 {
		holdCost(*addr, *holds)
		return
	}
	if *probe {
		timerProbe(*addr)
		return
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 32})
	defer rdb.Close()
	gr, err := padlock.New(rdb)
	check(err)
	vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
	check(err)
	vk, err := padlock.NewValkey(vc)
	check(err)
	libs := []struct {
		name string
		l    locker
	}{
		{"padlock (go-redis)", padlockLocker{gr.Lock("bench:padlock-goredis", padlock.TTL(8*time.Second))}},
		{"padlock (valkey-go)", padlockLocker{vk.Lock("bench:padlock-valkey", padlock.TTL(8*time.Second))}},
		{"redsync v4", redsyncLocker{redsync.New(goredis.NewPool(rdb))}},
		{"bsm/redislock", redislockLocker{redislock.New(rdb)}},
	}
	var out []result
	for _, kind := range strings.Split(*workKinds, ",") {
		work, ok := works[kind]
		if !ok {
			check(fmt.Errorf("-work %q: sleep, nanosleep or spin", kind))
		}
		out = out[:0]
		// Round robin in slices: a machine whose speed drifts over the
		// run (a shared VM's does) weighs on every library alike.
		tallies := make([]tally, len(libs))
		for i := range tallies {
			tallies[i].counts = make([]int, 8)
		}
		slice := time.Duration(*seconds) * time.Second / time.Duration(*rounds)
		for round := range *rounds {
			for i, lib := range libs {
				fmt.Fprintf(os.Stderr, "==> %s, round %d/%d: %s\n", kind, round+1, *rounds, lib.name)
				contended(lib.name, lib.l, &tallies[i], slice, work)
			}
		}
		for i, lib := range libs {
			out = append(out, tallies[i].result(lib.name))
		}
		fmt.Printf("### Contended: 8 goroutines, one lock, 1 ms of work (%s), %d s each in %d interleaved slices\n\n", kind, *seconds, *rounds)
		fmt.Println("| library | sections/s | fairness (fewest/most) | wait p50 | wait p99 | hand-off p50 | 1 ms of work took, p50 | failed acquires |")
		fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, r := range out {
			fmt.Printf("| %s | %.0f | %.2f | %.2f ms | %.2f ms | %.0f µs | %.3f ms | %d |\n", r.name, r.sections, r.fairness,
				ms(r.p50), ms(r.p99), float64(r.handOff.Microseconds()), float64(r.work.Microseconds())/1000, r.failed)
		}
		fmt.Println()
	}
	// The baseline last: the same two round trips without a lock library.
	ls := []locker{setNXDel{rdb}}
	for _, lib := range libs {
		ls = append(ls, lib.l)
	}
	took, failed := uncontended(ls, 5000)
	fmt.Println("### Uncontended: acquire + release, one goroutine, median of 5,000 each, the libraries in turn call by call")
	fmt.Println()
	fmt.Println("| library | µs per acquire + release | vs SET NX PX + DEL | failed |")
	fmt.Println("| --- | --- | --- | --- |")
	row := func(name string, i int) {
		fmt.Printf("| %s | %.0f | %.2fx | %d |\n", name, float64(took[i].Nanoseconds())/1000,
			float64(took[i])/float64(took[0]), failed[i])
	}
	for i, lib := range libs {
		row(lib.name, i+1)
	}
	row("SET NX PX + DEL (go-redis, no lock library)", 0)
}

// setNXDel is SET NX PX + DEL through go-redis: what an acquire and a
// release cost without any lock library, as the baseline row.
type setNXDel struct{ rdb *redis.Client }

func (s setNXDel) lock(ctx context.Context) (func(), error) {
	if _, err := s.rdb.SetNX(ctx, "bench:setnx", "v", 5*time.Second).Result(); err != nil {
		return nil, err
	}
	return func() { s.rdb.Del(ctx, "bench:setnx") }, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func check(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
