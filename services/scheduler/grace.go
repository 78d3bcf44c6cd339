package scheduler

import (
	"time"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
)

// A node lapses when its key goes (its agent's lease expired) or when it is
// stored NotReady (a Kubernetes node whose kubelet stopped posting status:
// the Kubernetes runtime writes its Ready condition). For lostGrace it keeps
// its pods, cordoned, as Kubernetes keeps pods on a NotReady node for their
// not-ready toleration; then they are lost (NODE_LOST). A node Ready again
// within the grace finds its pods still bound.
type graces struct {
	lostGrace time.Duration
	// missing are the nodes whose key went, and when; a node past the
	// grace leaves the map (and the model).
	missing map[string]time.Time
	// unready are the nodes stored NotReady, and since when; one past the
	// grace stays (lost) until it is Ready again or goes, so that another
	// update of a node that stays NotReady gives it no second grace.
	unready map[string]unready
}

type unready struct {
	since time.Time
	lost  bool
}

func newGraces(lostGrace time.Duration) graces {
	return graces{lostGrace: lostGrace, missing: map[string]time.Time{}, unready: map[string]unready{}}
}

// note follows a node's key: old is what was stored (had: anything), n what
// is now (nil when removed). Called with mu held.
func (g *graces) note(id string, old *nodemanagerv1.Node, had bool, n *nodemanagerv1.Node, now time.Time) {
	if g.lostGrace <= 0 {
		return
	}
	u, wasUnready := g.unready[id]
	switch {
	case n == nil:
		delete(g.unready, id)
		if !had || (wasUnready && u.lost) {
			return // already lost while NotReady
		}
		g.missing[id] = now
		if wasUnready && u.since.Before(now) {
			g.missing[id] = u.since // one lapse: NotReady, then gone
		}
	case n.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY:
		delete(g.missing, id)
		delete(g.unready, id)
	default:
		since, back := g.missing[id]
		delete(g.missing, id)
		switch {
		case wasUnready:
			return // the same lapse goes on
		case back:
			// Gone, then back NotReady: the lapse goes on.
		case had && old.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY:
			since = now
		default:
			// First seen NotReady (a new leader's list): since its
			// readiness changed, as its writer says, so that a new leader
			// neither loses it at once nor grants it a second grace.
			since = now
			if t := n.GetReadinessChangeTime(); t != nil && t.AsTime().Before(now) {
				since = t.AsTime()
			}
		}
		g.unready[id] = unready{since: since}
	}
}

// missingInGrace: the node's key went less than the grace ago.
func (g *graces) missingInGrace(id string) bool {
	_, ok := g.missing[id]
	return ok
}

// unreadyInGrace: the stored node n is NotReady, less than the grace ago,
// and not drained with eviction (which loses its pods at once): it keeps
// its pods, cordoned.
func (g *graces) unreadyInGrace(id string, n *nodemanagerv1.Node) bool {
	u, ok := g.unready[id]
	return ok && !u.lost && n.GetReadiness() != nodemanagerv1.Readiness_READINESS_READY && !(n.GetDrained() && n.GetDrainEvicts())
}

// expire ends the graces that are over at now and returns the nodes whose
// pods are then lost.
func (g *graces) expire(now time.Time) []string {
	var out []string
	for id, since := range g.missing {
		if now.Sub(since) >= g.lostGrace {
			delete(g.missing, id)
			out = append(out, id)
		}
	}
	for id, u := range g.unready {
		if !u.lost && now.Sub(u.since) >= g.lostGrace {
			g.unready[id] = unready{since: u.since, lost: true}
			out = append(out, id)
		}
	}
	return out
}

// expireGraces loses the nodes missing or NotReady for longer than the
// grace period. Called with mu held, before a cycle.
func (c *Cache) expireGraces(now time.Time) {
	expired := c.graces.expire(now)
	for _, id := range expired {
		c.dirty[kindNode][id] = true
		c.orphans.nodes[id] = true
	}
	if len(expired) > 0 {
		c.sync()
	}
}
