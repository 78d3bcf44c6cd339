package scheduling_test

import (
	"fmt"

	"pgregory.net/rapid"
)

// refSize bounds a drawn instance.
type refSize struct {
	nodes, projects [2]int // ranges
	departments     int    // 0: none half the time, two otherwise
	units           int    // candidate units at most
	gangs           bool   // j is a 2-pod gang a quarter of the time
	// crowded: more workloads are drawn (nodes fill up), a third of them
	// in another project of j's department and none in j's, which deserves
	// what j asks for; no limits (victims needed to get under a limit are
	// searched greedily past 12 candidates).
	crowded bool
}

// refSmall: 1–3 nodes, 2–4 projects, 10 units, j sometimes a gang.
var refSmall = refSize{nodes: [2]int{1, 3}, projects: [2]int{2, 4}, units: 10, gangs: true}

// refLarge: 3–6 nodes, 4–7 projects in three departments, 14 units, j one
// pod: the victim groups of several departments meet on the same nodes, so
// the per-node search defers groups, resolves their units node by node and
// bounds nodes before enumerating them.
var refLarge = refSize{nodes: [2]int{3, 6}, projects: [2]int{4, 7}, departments: 3, units: 14, crowded: true}

// refDraw draws an instance of size sz: nodes of 1–8 GPUs, projects (half
// the time in two departments, or in sz.departments, some with limits),
// running workloads of 1–4 GPUs, 0.5, 2-pod gangs and elastic ones above
// their minimum (sz.units candidate units at most; some non-preemptible),
// and a pending j of 0.5–4 GPUs, one pod or a 2-pod gang, of any priority.
// The draws lean towards instances where j needs victims: j's project
// usually deserves what j asks for, holds little, and j usually does not
// fit the idle devices.
func refDraw(t *rapid.T, sz refSize) refSpec {
	sp := refSpec{Spread: rapid.IntRange(0, 3).Draw(t, "spread") == 0}
	type free struct{ idle, half int } // idle devices; devices holding one 0.5
	room := map[string]*free{}
	largest := 0
	for i := range rapid.IntRange(sz.nodes[0], sz.nodes[1]).Draw(t, "nodes") {
		n := refNode{fmt.Sprintf("n%d", i+1), rapid.IntRange(1, 8).Draw(t, "gpus")}
		sp.Nodes = append(sp.Nodes, n)
		room[n.Name] = &free{idle: n.GPUs}
		largest = max(largest, n.GPUs)
	}
	var depts []string
	names := []string{"d1", "d2"}
	if sz.departments > 0 {
		names = []string{"d1", "d2", "d3", "d4"}[:sz.departments]
	}
	if sz.departments > 0 || rapid.Bool().Draw(t, "departments") {
		for _, name := range names {
			d := refQueue{Name: name, Deserved: float64(rapid.IntRange(0, 6).Draw(t, "deptDeserved"))}
			if !sz.crowded && rapid.IntRange(0, 5).Draw(t, "deptLimited") == 0 {
				d.Limit = max(1, d.Deserved+float64(rapid.IntRange(0, 2).Draw(t, "deptLimit")))
			}
			sp.Depts = append(sp.Depts, d)
			depts = append(depts, name)
		}
	}
	var projects []string
	for i := range rapid.IntRange(sz.projects[0], sz.projects[1]).Draw(t, "projects") {
		p := refQueue{Name: fmt.Sprintf("p%d", i+1), Deserved: float64(rapid.IntRange(0, 4).Draw(t, "deserved"))}
		if len(depts) > 0 {
			p.Dept = rapid.SampledFrom(depts).Draw(t, "dept")
		}
		if !sz.crowded && rapid.IntRange(0, 4).Draw(t, "limited") == 0 {
			p.Limit = max(1, p.Deserved+float64(rapid.IntRange(0, 2).Draw(t, "limit")))
		}
		sp.Projects = append(sp.Projects, p)
		projects = append(projects, p.Name)
	}

	sp.J = refWorkload{Name: "j", Project: rapid.SampledFrom(projects).Draw(t, "jProject"),
		Prio: rapid.SampledFrom([]string{"train", "train", "interactive-preemptible", "interactive-preemptible", "build", "inference"}).Draw(t, "jPrio"),
		Pods: 1, MinPods: 1, At: 10}
	if sz.gangs && rapid.IntRange(0, 3).Draw(t, "jGang") == 0 {
		sp.J.Pods, sp.J.MinPods = 2, 2
	}
	var others []string // projects other than j's
	for _, p := range projects {
		if p != sp.J.Project {
			others = append(others, p)
		}
	}

	units := 0
	var neighbours []string // others in j's department
	for _, p := range sp.Projects {
		if p.Name != sp.J.Project && p.Dept != "" && p.Dept == refDept(sp, sp.J.Project) {
			neighbours = append(neighbours, p.Name)
		}
	}
	drawn := rapid.IntRange(1, sz.units).Draw(t, "victims")
	if sz.crowded {
		drawn = rapid.IntRange(sz.units/2, 2*sz.units).Draw(t, "victims")
	}
	for range drawn {
		project := rapid.SampledFrom(others).Draw(t, "project")
		if sz.crowded && len(neighbours) > 0 && rapid.IntRange(0, 2).Draw(t, "inNeighbour") == 0 {
			project = rapid.SampledFrom(neighbours).Draw(t, "neighbour")
		} else if !sz.crowded && rapid.IntRange(0, 3).Draw(t, "inJProject") == 0 {
			project = sp.J.Project
		}
		v := refWorkload{Name: fmt.Sprintf("v%d", len(sp.Victims)+1), Project: project,
			Prio: rapid.SampledFrom([]string{"train", "train", "interactive-preemptible", "build"}).Draw(t, "prio"),
			Pods: 1, MinPods: 1, At: rapid.IntRange(0, 3).Draw(t, "at")}
		switch rapid.IntRange(0, 5).Draw(t, "kind") {
		case 0, 1, 2:
			v.GPU = float64(rapid.IntRange(1, 4).Draw(t, "wholeGPUs"))
		case 3:
			v.GPU = 0.5
		case 4: // a gang: one unit of two pods
			v.GPU, v.Pods, v.MinPods = 1, 2, 2
		case 5: // elastic, at full size: one unit per pod above the minimum
			v.GPU, v.Pods = rapid.SampledFrom([]float64{0.5, 1}).Draw(t, "elasticGPU"), rapid.IntRange(2, 3).Draw(t, "elasticPods")
		}
		n := 1
		if v.Pods > v.MinPods {
			n = v.Pods - v.MinPods
		}
		if units+n > sz.units {
			continue
		}
		// Place every pod on a node it fits, or drop the workload.
		trial := map[string]free{}
		for name, f := range room {
			trial[name] = *f
		}
		for range v.Pods {
			var fits []string
			for _, node := range sp.Nodes {
				f := trial[node.Name]
				if v.GPU < 1 && f.idle+f.half > 0 || v.GPU >= 1 && f.idle >= int(v.GPU) {
					fits = append(fits, node.Name)
				}
			}
			if len(fits) == 0 {
				v.On = nil
				break
			}
			node := rapid.SampledFrom(fits).Draw(t, "on")
			f := trial[node]
			switch {
			case v.GPU >= 1:
				f.idle -= int(v.GPU)
			case f.half > 0: // a fraction goes to the fullest shared device
				f.half--
			default:
				f.idle, f.half = f.idle-1, f.half+1
			}
			trial[node] = f
			v.On = append(v.On, node)
		}
		if len(v.On) < v.Pods {
			continue
		}
		for name, f := range trial {
			*room[name] = f
		}
		units += n
		sp.Victims = append(sp.Victims, v)
	}

	// j's size: usually one that does not fit the idle devices as they are
	// (but fits some node), sometimes any.
	sizes := []float64{0.5, 1, 1, 2, 3, 4}
	if rapid.IntRange(0, 5).Draw(t, "jAnySize") > 0 {
		fitsIdle := func(g float64) bool { // j's pods, one by one, greedily
			left := map[string]free{}
			for name, f := range room {
				left[name] = *f
			}
			for range sp.J.Pods {
				placed := false
				for _, n := range sp.Nodes {
					f := left[n.Name]
					switch {
					case g < 1 && f.half > 0:
						f.half--
					case g < 1 && f.idle > 0:
						f.idle, f.half = f.idle-1, f.half+1
					case g >= 1 && f.idle >= int(g):
						f.idle -= int(g)
					default:
						continue
					}
					left[n.Name], placed = f, true
					break
				}
				if !placed {
					return false
				}
			}
			return true
		}
		var tight []float64
		for _, g := range sizes {
			if !fitsIdle(g) && int(g) <= largest {
				tight = append(tight, g)
			}
		}
		if len(tight) > 0 {
			sizes = tight
		}
	}
	sp.J.GPU = rapid.SampledFrom(sizes).Draw(t, "jGPU")
	// j's project usually deserves what j asks for, or that and what it
	// holds, so that it passes the reclaim gate.
	want := sp.J.GPU * float64(sp.J.Pods)
	deserves := rapid.IntRange(0, 2).Draw(t, "jDeserves")
	if sz.crowded {
		deserves = max(deserves, 1)
	}
	switch deserves {
	case 2:
		for _, v := range sp.Victims {
			if v.Project == sp.J.Project {
				want += v.GPU * float64(v.Pods)
			}
		}
		fallthrough
	case 1:
		for i := range sp.Projects {
			if p := &sp.Projects[i]; p.Name == sp.J.Project {
				p.Deserved = max(p.Deserved, want)
				if p.Limit > 0 {
					p.Limit = max(p.Limit, p.Deserved)
				}
			}
		}
	}
	return sp
}

func refDept(sp refSpec, project string) string {
	for _, p := range sp.Projects {
		if p.Name == project {
			return p.Dept
		}
	}
	return ""
}
