// Package harness is what the Go driver programs share (see
// drivers/README.md): the environment, the checks, the workers and the
// closing line. A program stops at the first wrong result, printing what
// was expected and what came.
package harness

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Env is the program's environment (drivers/README.md).
type Env struct {
	Host, Port               string
	User, Password, Database string
	Workers, Iterations      int
	PoolSize                 string
	Tag                      string
	Mode                     string
}

// Prepared tells whether the program runs in its `prepared` mode.
func (e Env) Prepared() bool { return e.Mode == "prepared" }

func need(name string) string {
	v := os.Getenv(name)
	if v == "" {
		fmt.Fprintf(os.Stderr, "%s is not set\n", name)
		os.Exit(2)
	}
	return v
}

func number(name string, fallback int) int {
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "%s=%q is not a positive number\n", name, v)
		os.Exit(2)
	}
	return n
}

// Load reads the environment; the mode is the program's first argument.
func Load() Env {
	mode := "default"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode != "default" && mode != "prepared" {
		fmt.Fprintf(os.Stderr, "unknown mode %q (default, prepared)\n", mode)
		os.Exit(2)
	}
	pool := os.Getenv("GH_POOL_SIZE")
	if pool == "" {
		pool = "?"
	}
	return Env{
		Host:       need("GH_HOST"),
		Port:       need("GH_PORT"),
		User:       need("GH_USER"),
		Password:   need("GH_PASSWORD"),
		Database:   need("GH_DATABASE"),
		Workers:    number("GH_WORKERS", 20),
		Iterations: number("GH_ITERATIONS", 30),
		PoolSize:   pool,
		Tag:        regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(need("GH_TAG"), "_"),
		Mode:       mode,
	}
}

var (
	checks   atomic.Int64
	failOnce sync.Mutex
	env      Env
)

// Fail prints the first failure and ends the program with status 1.
func Fail(where, format string, args ...any) {
	failOnce.Lock() // never unlocked: the first failure is the one printed
	fmt.Fprintf(os.Stderr, "FAILED %s: %s\n", where, fmt.Sprintf(format, args...))
	fmt.Fprintf(os.Stderr, "(%d workers through a pool of %s; %d checks had passed)\n", env.Workers, env.PoolSize, checks.Load())
	os.Exit(1)
}

// Check compares what came with what must come, exactly (reflect.DeepEqual,
// so types count too); where names the check for the failure message.
func Check(where, what string, expected, got any) {
	if !reflect.DeepEqual(expected, got) {
		Fail(where, "%s: expected %s, got %s", what, show(expected), show(got))
	}
	checks.Add(1)
}

// CheckOneOf is Check for a result that may be any of several.
func CheckOneOf(where, what string, alternatives []any, got any) {
	for _, a := range alternatives {
		if reflect.DeepEqual(a, got) {
			checks.Add(1)
			return
		}
	}
	shown := make([]string, len(alternatives))
	for i, a := range alternatives {
		shown[i] = show(a)
	}
	Fail(where, "%s: expected one of %s, got %s", what, strings.Join(shown, " or "), show(got))
}

// Counted records a check made by hand.
func Counted() { checks.Add(1) }

func show(v any) string {
	if err, ok := v.(error); ok {
		return fmt.Sprintf("error %q", err.Error())
	}
	return fmt.Sprintf("%#v", v)
}

// W is one worker: its number and what it is doing (for messages).
type W struct {
	ID    int
	where atomic.Value
	done  atomic.Bool
}

// At records the step the worker is in and returns its name for messages.
func (w *W) At(i int, step string) string {
	s := fmt.Sprintf("worker %d iteration %d step %s", w.ID, i, step)
	w.where.Store(s)
	return s
}

// Where is the worker's current step.
func (w *W) Where() string {
	s, _ := w.where.Load().(string)
	if s == "" {
		return fmt.Sprintf("worker %d starting", w.ID)
	}
	return s
}

// Must fails on an unexpected error.
func (w *W) Must(err error, what string) {
	if err != nil {
		Fail(w.Where(), "%s: unexpected error: %v%s", what, err, detail(err))
	}
}

func detail(err error) string {
	var d interface{ Detail() string }
	if errors.As(err, &d) {
		return " (" + d.Detail() + ")"
	}
	return ""
}

// watchdogSeconds is how long the workers may take before the watchdog
// names the stuck ones: GH_WATCHDOG, 240 by default (the test harness sets
// more when every program runs at once).
func watchdogSeconds() int {
	if s, err := strconv.Atoi(os.Getenv("GH_WATCHDOG")); err == nil && s > 0 {
		return s
	}
	return 240
}

// Run starts GH_WORKERS workers (numbered from 1) and waits for them; a
// watchdog names the stuck ones if they take more than watchdogSeconds.
func Run(e Env, body func(w *W)) time.Duration {
	env = e
	started := time.Now()
	workers := make([]*W, e.Workers)
	var wg sync.WaitGroup
	for i := range workers {
		w := &W{ID: i + 1}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(w)
			w.done.Store(true)
		}()
	}
	finished := make(chan struct{})
	go func() {
		select {
		case <-finished:
		case <-time.After(time.Duration(watchdogSeconds()) * time.Second):
			var stuck []string
			for _, w := range workers {
				if !w.done.Load() {
					stuck = append(stuck, w.Where())
				}
			}
			sort.Strings(stuck)
			Fail("watchdog", "still running after %d s:\n  %s", watchdogSeconds(), strings.Join(stuck, "\n  "))
		}
	}()
	wg.Wait()
	close(finished)
	return time.Since(started)
}

// Setup records the environment for failures before Run (for setup steps).
func Setup(e Env) { env = e }

// Finish prints the closing line.
func Finish(e Env, took time.Duration) {
	fmt.Printf("%s: workers done in %.1f s\n", e.Tag, took.Seconds())
	fmt.Printf("%s: %d workers x %d iterations, %d checks passed\n", e.Tag, e.Workers, e.Iterations, checks.Load())
}
