package window

import (
	"fmt"
	"strings"
)

// dump describes what f's Host holds and the spool queues, for a failure.
func (f *fixture) dump() string {
	var b strings.Builder
	ls := &f.w.lanes
	fmt.Fprintf(&b, "held %d mem %d ready %d retry %d onDisk %v loading %v reading %d lanes %d untracked %v capped %v loadQ %d reads %d out %d\n",
		f.w.Held(), ls.mem, f.w.ready.Len(), f.w.retry.Len(), f.w.onDisk, f.w.loading, ls.r().reading, ls.count(), ls.r().untracked, ls.r().capped, ls.loadQ.len(), len(f.e.reads), f.e.out)
	for k, st := range ls.r().order {
		fmt.Fprintf(&b, "order %v lane %v active %d parked %v\n", k, st.lane, st.active, st.parked)
	}
	for l := range ls.all() {
		fmt.Fprintf(&b, "lane %v q %d cursor %d lastSeen %d onDisk %v loading %v inLoadQ %v refs %d out %d leaving %v\n", l.id, l.q.Len(), l.cursor, l.lastSeen, l.onDisk, l.loading, l.inLoadQ, l.refs, l.out, l.leaving)
	}
	for _, u := range f.sp.Lanes(testHost) {
		fmt.Fprintf(&b, "spool lane %v queued %d\n", u.Lane, u.Queued)
	}
	return b.String()
}
