// Package schedtest builds scheduler states for tests in a few readable
// lines, in the spirit of Kueue's test wrappers:
//
//	s := schedtest.NewCluster().
//		Node("n1", 8).
//		Department("research", 6).
//		Project("team-a", "research", schedtest.Deserved(2), schedtest.Limit(4)).
//		Workload(schedtest.W("a1").Project("team-a").GPU(1).On("n1")).
//		Workload(schedtest.W("a2").Project("team-a").GPU(1).Pods(2)).
//		State()
//
// A workload given nodes with On is already running there; one without is
// Pending. RunUntilStable plays Cycle and Apply until a plan changes nothing,
// and Random draws a whole cluster for property tests (see Spec).
//
// The builders panic on a mistake in the test itself (an unknown project, a
// pod that does not fit the node it is put on): such a state is a bug in the
// test, not an outcome to check.
package schedtest
