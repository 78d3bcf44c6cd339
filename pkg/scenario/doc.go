// Package scenario loads and plays scheduling scenarios: YAML files that
// describe a cluster, an organisation (departments, projects, quotas) and a
// timeline of actions, as specified in scenarios/FORMAT.md.
//
// Load turns a file into plain data (a Scenario) and rejects anything the
// format does not allow, naming the file and line: a scenario that loads is
// one the runner can play without further checks on its shape. ReadTrace
// reads the CSV job traces that a replay action submits.
package scenario
