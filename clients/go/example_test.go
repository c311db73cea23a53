package padlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	padlock "github.com/padlock-redis/padlock/clients/go"
)

// The examples run against a server TestMain starts (in an application:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"})).
var exampleAddr string

func TestMain(m *testing.M) {
	stop := startExampleServer()
	code := m.Run()
	stop()
	os.Exit(code)
}

func startExampleServer() func() {
	so, bin := os.Getenv("PADLOCK_SO"), os.Getenv("PADLOCK_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	dir, _ := os.MkdirTemp("", "padlock-go-examples")
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--dir", dir, "--loadmodule", so)
		if cmd.Start() != nil {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		for range 100 {
			if c.Ping(context.Background()).Err() == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		ok := c.Do(context.Background(), "LOCK.INFO", "x").Err() == redis.Nil
		_ = c.Close()
		if ok {
			exampleAddr = addr
			return func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

func newRedis() *redis.Client { return redis.NewClient(&redis.Options{Addr: exampleAddr}) }

// The nested call reenters: validateInventory locks the order its caller
// holds, with a context derived from the caller's.
func ExampleLock() {
	p, _ := padlock.New(newRedis())
	defer p.Close()
	ctx := context.Background()

	validateInventory := func(ctx context.Context, order string) {
		l := p.Lock("order:"+order, padlock.TTL(5*time.Second))
		held, err := l.Acquire(ctx) // reenters: ctx carries the caller's holder
		if err != nil {
			panic(err)
		}
		defer l.Release(held)
		fence, _ := l.Fence(held)
		fmt.Println("inventory checked under fence", fence > 0)
	}
	processOrder := func(ctx context.Context, order string) {
		l := p.Lock("order:"+order, padlock.TTL(5*time.Second))
		held, err := l.Acquire(ctx)
		if err != nil {
			panic(err)
		}
		defer l.Release(held)
		validateInventory(held, order)
	}
	processOrder(ctx, "1001")
	// Output: inventory checked under fence true
}

func ExampleLock_TryAcquire() {
	p, _ := padlock.New(newRedis())
	defer p.Close()
	l := p.Lock("report:daily", padlock.TTL(30*time.Second))
	held, ok, _ := l.TryAcquire(context.Background())
	fmt.Println("first:", ok)
	_, again, _ := l.TryAcquire(context.Background()) // another holder
	fmt.Println("second:", again)
	_ = l.Release(held)
	// Output:
	// first: true
	// second: false
}

func ExampleSemaphore() {
	p, _ := padlock.New(newRedis())
	defer p.Close()
	pool := p.Semaphore("pool:db", 10).Permits(2)
	held, err := pool.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("holding 2 of 10:", pool.Held(held))
	_ = pool.Release(held)
	// Output: holding 2 of 10: true
}

func ExampleRWLock() {
	p, _ := padlock.New(newRedis())
	defer p.Close()
	rw := p.RWLock("cache:prices")
	r, _ := rw.RLock(context.Background())
	w, err := rw.Lock(r) // the only reader upgrades
	fmt.Println("upgraded:", err == nil)
	_ = rw.Unlock(w)
	_ = rw.RUnlock(r)
	// Output: upgraded: true
}

func ExampleMultiLock() {
	p, _ := padlock.New(newRedis())
	defer p.Close()
	m := p.MultiLock([]string{"{acct}:1", "{acct}:2"})
	held, err := m.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	fences, _ := m.Fences(held)
	fmt.Println("fences:", len(fences))
	_ = m.Release(held)
	// Output: fences: 2
}

func ExampleLock_Locker() {
	p, _ := padlock.New(newRedis())
	defer p.Close()
	mu := p.Lock("legacy").Locker(context.Background())
	mu.Lock()
	fmt.Println("locked")
	mu.Unlock()
	// Output: locked
}
