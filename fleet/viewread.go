package fleet

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FleetHost is one host in the fleet's view: the totals over the live
// replicas that publish it, and each one's part.
type FleetHost struct {
	Host      string `json:"host"`
	Queued    int64  `json:"queued"`
	InFlight  int    `json:"in_flight"`
	Delivered int64  `json:"delivered"`
	Dead      int64  `json:"dead"`
	// Paused, Held (a reason) and Breaker say what any replica said.
	Paused   bool           `json:"paused"`
	Held     string         `json:"held,omitempty"`
	Breaker  string         `json:"breaker,omitempty"`
	Replicas []ReplicaShare `json:"replicas"`
}

// ReplicaShare is one replica's part of a host in the fleet's view.
type ReplicaShare struct {
	Replica string `json:"replica"`
	HostSummary
}

// ViewPage is one page of the fleet's view, sorted by host.
type ViewPage struct {
	Hosts []FleetHost `json:"hosts"`
	// Replicas are the live replicas merged (those without a summary yet
	// included).
	Replicas []string `json:"replicas"`
	// NextCursor, when set, asks for the next page; absent on the last.
	NextCursor string `json:"next_cursor,omitempty"`
	// Lost lists the live replicas that found a host's state lost in
	// Redis (restarted, flushed, failed over) in the last day, and
	// restored what they remembered.
	Lost []ReplicaLost `json:"state_lost,omitempty"`
}

// ReplicaLost is how many times a replica found a host's state lost in
// Redis, and when it last did.
type ReplicaLost struct {
	Replica string    `json:"replica"`
	Times   int       `json:"times"`
	Last    time.Time `json:"last"`
}

// View reads a page of the fleet's view: the hosts after cursor (a
// NextCursor), at most limit of them (0: all), merged over the live
// replicas. It costs one round trip for the live replicas and one with
// a ZRANGE of at most limit members per live replica.
func (l *Limiter) View(ctx context.Context, cursor string, limit int) (ViewPage, error) {
	live, err := l.liveReplicas(ctx)
	if err != nil {
		return ViewPage{}, err
	}
	min := "-"
	if cursor != "" {
		min = "(" + cursor + "\x01" // past every member of cursor ("host\x00...")
	}
	cmds := make([]*redis.StringSliceCmd, len(live))
	var lost *redis.SliceCmd
	err = l.cmd(ctx, "view", "", func(ctx context.Context) error {
		_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if len(live) > 0 {
				lost = p.HMGet(ctx, l.lostKey(), live...)
			}
			for i, r := range live {
				cmds[i] = p.ZRangeArgs(ctx, redis.ZRangeArgs{Key: l.viewKey(r), Start: min, Stop: "+",
					ByLex: true, Offset: 0, Count: int64(limit)})
			}
			return nil
		})
		return err
	})
	if err != nil {
		return ViewPage{}, err
	}
	page := ViewPage{Replicas: live, Lost: lostOf(live, lost)}
	byHost := map[string]*FleetHost{}
	for i, c := range cmds {
		for _, m := range c.Val() {
			s, ok := parseMember(m)
			if !ok {
				continue
			}
			fh := byHost[s.Host]
			if fh == nil {
				fh = &FleetHost{Host: s.Host}
				byHost[s.Host] = fh
			}
			fh.add(live[i], s)
		}
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	// A replica that sent limit members may have more after its last:
	// the first limit hosts of the union are complete (each such replica
	// alone has limit hosts up to its last one).
	if limit > 0 && (len(hosts) > limit || len(hosts) == limit && full(cmds, limit)) {
		hosts = hosts[:limit]
		page.NextCursor = hosts[len(hosts)-1]
	}
	for _, h := range hosts {
		page.Hosts = append(page.Hosts, *byHost[h])
	}
	return page, nil
}

// full reports whether any replica's page was full (it may have more).
func full(cmds []*redis.StringSliceCmd, limit int) bool {
	return slices.ContainsFunc(cmds, func(c *redis.StringSliceCmd) bool { return len(c.Val()) >= limit })
}

func (fh *FleetHost) add(replica string, s HostSummary) {
	fh.Queued += s.Queued
	fh.InFlight += s.InFlight
	fh.Delivered += s.Delivered
	fh.Dead += s.Dead
	fh.Paused = fh.Paused || s.Paused
	if fh.Held == "" {
		fh.Held = s.Held
	}
	if fh.Breaker == "" || s.Breaker == "open" {
		fh.Breaker = s.Breaker
	}
	fh.Replicas = append(fh.Replicas, ReplicaShare{Replica: replica, HostSummary: s})
}

// liveReplicas are the replicas whose heartbeat has not expired, by the
// Redis server's clock (or the test clock), sorted.
func (l *Limiter) liveReplicas(ctx context.Context) ([]string, error) {
	var out []string
	err := l.cmd(ctx, "view", "", func(ctx context.Context) error {
		now := l.nowArg()
		if now == "0" {
			t, err := l.rdb.Time(ctx).Result()
			if err != nil {
				return err
			}
			now = strconv.FormatInt(t.UnixMicro(), 10)
		}
		var err error
		out, err = l.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: l.replicasKey(), Start: "(" + now, Stop: "+inf", ByScore: true}).Result()
		return err
	})
	slices.SortFunc(out, strings.Compare)
	return out, err
}

// lostOf reads the lost hash's values for the live replicas.
func lostOf(live []string, c *redis.SliceCmd) []ReplicaLost {
	if c == nil {
		return nil
	}
	var out []ReplicaLost
	for i, v := range c.Val() {
		s, _ := v.(string)
		n, at, ok := strings.Cut(s, ":")
		times, err1 := strconv.Atoi(n)
		secs, err2 := strconv.ParseInt(at, 10, 64)
		if ok && err1 == nil && err2 == nil && times > 0 {
			out = append(out, ReplicaLost{Replica: live[i], Times: times, Last: time.Unix(secs, 0).UTC()})
		}
	}
	return out
}
