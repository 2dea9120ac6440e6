package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// settings is every command-line flag in one place, and what run derives
// from them (the -quick defaults, the generators, the sections).
type settings struct {
	// internal: this program run as a helper process (-role sink)
	role          string
	sinkListeners int
	sinkStatus    int
	sinkRecord    string
	floorFile     string
	floorQuickAck bool
	floorBadger   bool

	binary       string
	quick        bool
	only         string
	gen          string
	conns        int
	dur          time.Duration // ingest: each measured run
	reps         int
	logLevel     string
	infoRow      bool
	n            int // replay: webhooks
	c            int // replay: concurrency
	queued       int // RSS: webhooks queued
	rssHosts     int // RSS: hosts they are spread over in the second case
	fairKeys     int // fairness: keys the many-keys backlog is spread over
	backlog      time.Duration
	senderN      int    // sender: sequential POSTs per run
	reuseHosts   int    // reuse: hosts
	reuseRounds  int    // reuse: one webhook per host per round
	hostsN       int    // hosts: hosts
	hostsPer     int    // hosts: webhooks per host
	hostsAgainst string // hosts: a binary run before the one under test in each rep
	hostsOne     bool   // hosts: each run is paired with the same webhooks to one host
	hostsYAML    string // hosts: YAML appended to every run's config
	senderRuns   int    // sender: runs per rep
	workdir      string
	keep         bool
	profile      string
	fleetProf    string
	out          string
	floorPairs   int
	compare      stringList // floor: more hookpace binaries, measured in the same pairs
	compareYAML  string     // floor: a YAML file appended to the -compare binaries' config
	replayProf   string
	replayYAML   string // replay: YAML appended to hookpace's config
	latRate      float64
	latDur       time.Duration
	latOld       string
	latDump      string

	quiet     float64
	disturbed float64
	retries   int
	quietWait time.Duration

	// derived by resolve
	gens     []string
	sections map[string]bool
}

// flags is registered at start-up, so that `go test ./bench` parses
// -workdir too (the in-process benchmarks use it).
var flags = register(flag.CommandLine)

func register(fs *flag.FlagSet) *settings {
	s := &settings{}
	fs.StringVar(&s.role, "role", "", "internal: run as a helper process (sink, floor, capture)")
	fs.IntVar(&s.sinkListeners, "sink-listeners", 1, "internal: sink listeners")
	fs.IntVar(&s.sinkStatus, "sink-status", 202, "internal: sink answer status")
	fs.StringVar(&s.sinkRecord, "sink-record", "none", "internal: sink recording (none|last|all)")

	fs.StringVar(&s.floorFile, "floor-file", "", "internal: the floor server's log file")
	fs.BoolVar(&s.floorQuickAck, "floor-quickack", false, "internal: the floor server re-arms TCP_QUICKACK after each read")
	fs.BoolVar(&s.floorBadger, "floor-badger", false, "internal: the floor server commits each body to Badger (-floor-file is its directory)")
	fs.StringVar(&s.binary, "binary", "", "hookpace binary to test (default: build ./cmd/hookpace)")
	fs.BoolVar(&s.quick, "quick", false, "smaller and shorter runs (a smoke test, not the measurement)")
	fs.StringVar(&s.only, "only", "ingest,replay,rss,pacing,sender", "comma-separated sections to run (fleet, adaptive, inbound and capture too, on request)")
	fs.StringVar(&s.gen, "gen", "auto", "ingest load generators, comma-separated: wrk, go (raw keep-alive TCP), gohttp (net/http Transport via proxy); auto = wrk,go (go alone without wrk)")
	fs.IntVar(&s.conns, "conns", 64, "ingest: connections")
	fs.DurationVar(&s.dur, "d", 0, "ingest: length of each measured run (default 10s; -quick 4s)")
	fs.IntVar(&s.reps, "reps", 0, "repetitions of the ingest and replay measurements (default 2; -quick 1)")
	fs.StringVar(&s.logLevel, "log-level", "warn", "hookpace log.level for the measurements")
	fs.BoolVar(&s.infoRow, "info-row", true, "ingest: also measure hookpace at log.level info (the product default), with wrk")
	fs.IntVar(&s.n, "n", 0, "replay: webhooks (default 50000; -quick 10000)")
	fs.IntVar(&s.c, "c", 64, "replay: concurrency of hookpace's host and of the plain client")
	fs.IntVar(&s.queued, "queued", 0, "RSS: webhooks to queue behind a 1/s host (default 200000; -quick 50000)")
	fs.IntVar(&s.rssHosts, "rss-hosts", 0, "RSS: then queue the same webhooks spread over this many hosts at 1/h (default 5000; -quick 1000; -1: skip)")
	fs.IntVar(&s.reuseHosts, "reuse-hosts", 5000, "reuse: hosts, one webhook each per round")
	fs.IntVar(&s.reuseRounds, "reuse-rounds", 10, "reuse: rounds")
	fs.IntVar(&s.hostsN, "hosts-n", 50000, "hosts: hosts, at 127.x.y.z")
	fs.IntVar(&s.hostsPer, "hosts-per", 4, "hosts: webhooks per host")
	fs.StringVar(&s.replayYAML, "replay-config", "", "replay: a YAML file appended to hookpace's config (e.g. journal: {off: true}), to compare settings")
	fs.StringVar(&s.hostsYAML, "hosts-config", "", "hosts: a YAML file appended to the config of every run (e.g. delivery: {max_idle_connections: 1000})")
	fs.BoolVar(&s.hostsOne, "hosts-one", false, "hosts: before each run, post the same webhooks in the same rounds to one host, and report CPU per webhook against it (both at a rate that never holds)")
	fs.StringVar(&s.hostsAgainst, "hosts-against", "", "hosts: a hookpace binary measured before the one under test in each rep (alternating pairs)")
	fs.IntVar(&s.fairKeys, "fair-keys", 50000, "fairness: keys the many-tenants backlog is spread over (one webhook each)")
	fs.IntVar(&s.senderN, "sender-n", 50, "sender: sequential POSTs from one Python requests.Session per run")
	fs.IntVar(&s.senderRuns, "sender-runs", 5, "sender: runs per rep, each direct then through hookpace")
	fs.DurationVar(&s.backlog, "pacing-backlog", 0, "pacing: backlog per host, in time at its rate (default 15s; -quick 6s)")
	fs.StringVar(&s.workdir, "workdir", "", "parent dir for spools and scratch files (default $TMPDIR); must be a real disk for fsync to mean anything")
	fs.BoolVar(&s.keep, "keep", false, "keep spool dirs and logs")
	fs.StringVar(&s.profile, "profile", "", "after the ingest section, CPU-profile hookpace (built from ./bench/pprofwrap) during a wrk ingest run and write the profile here")
	fs.StringVar(&s.fleetProf, "fleet-profile", "", "fleet: run hookpace built from ./bench/pprofwrap and write a CPU profile of each replay (resume to drained) into this directory")
	fs.IntVar(&s.floorPairs, "floor-pairs", 3, "floor: alternating pairs of the group-commit floor and hookpace")
	fs.Var(&s.compare, "compare", "floor: another hookpace binary to measure in the same pairs (repeatable), e.g. one built from main")
	fs.StringVar(&s.compareYAML, "compare-config", "", "floor: YAML appended to the config of the -compare binaries (e.g. journal: {off: true}), to compare settings in pairs")
	fs.StringVar(&s.replayProf, "replay-profile", "", "replay: run hookpace built from ./bench/pprofwrap and write a CPU profile and an execution trace (.trace) of each replay (resume to delivered) into this directory")
	fs.Float64Var(&s.latRate, "lat-rate", 200, "latency: webhooks offered a second")
	fs.DurationVar(&s.latDur, "lat-d", 15*time.Second, "latency: how long they are offered")
	fs.StringVar(&s.latOld, "lat-old", "", "latency: also measure this hookpace binary, in alternating pairs before -binary's")
	fs.StringVar(&s.latDump, "lat-dump", "", "latency: write each webhook's 202 time and latency (ms) to PREFIX-repN-DIR.tsv")
	fs.StringVar(&s.out, "out", "", "also write the report to this file")
	fs.Float64Var(&s.quiet, "quiet", 0.35, "before each measured run, wait until other processes plus hypervisor steal take fewer than this many cores (0: don't wait)")
	fs.Float64Var(&s.disturbed, "disturbed", 0.3, "a measured run during which other processes plus hypervisor steal took more than this many cores is repeated (see -retries) and flagged with !")
	fs.IntVar(&s.retries, "retries", 2, "repeats of a disturbed run; the least disturbed attempt is kept")
	fs.DurationVar(&s.quietWait, "quiet-wait", 90*time.Second, "longest wait for -quiet before measuring anyway")
	return s
}

// resolve fills the sizes left at 0 with the defaults (smaller with
// -quick) and parses -only and -gen.
func (s *settings) resolve() error {
	def := struct {
		dur, backlog    time.Duration
		reps, n, queued int
		hosts           int
	}{10 * time.Second, 15 * time.Second, 2, 50000, 200000, 5000}
	if s.quick {
		def.dur, def.backlog, def.reps, def.n, def.queued, def.hosts = 4*time.Second, 6*time.Second, 1, 10000, 50000, 1000
	}
	s.dur = orDefault(s.dur, def.dur)
	s.backlog = orDefault(s.backlog, def.backlog)
	s.reps = orDefault(s.reps, def.reps)
	s.n = orDefault(s.n, def.n)
	s.queued = orDefault(s.queued, def.queued)
	if s.rssHosts == 0 {
		s.rssHosts = def.hosts
	}
	s.sections = map[string]bool{}
	for _, x := range strings.Split(s.only, ",") {
		s.sections[strings.TrimSpace(x)] = true
	}
	s.gens = nil
	if s.gen == "auto" {
		s.gens = []string{"go"}
		if haveWrk() {
			s.gens = []string{"wrk", "go"}
		}
	} else {
		for _, g := range strings.Split(s.gen, ",") {
			switch g = strings.TrimSpace(g); g {
			case "wrk", "go", "gohttp":
				s.gens = append(s.gens, g)
			default:
				return fmt.Errorf("-gen: unknown generator %q (wrk, go, gohttp)", g)
			}
		}
	}
	if slices.Contains(s.gens, "wrk") && !haveWrk() {
		return fmt.Errorf("wrk is not installed (apt-get update && apt-get install -y wrk), or use -gen go")
	}
	return nil
}

// orDefault is v, or def when v was left at 0 (the flag's "default").
func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
