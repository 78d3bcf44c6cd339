// Package nodemanager is Runway's NodeManagerService: the registry of nodes
// and the channel node agents report through. See README.md for the keys,
// the drain rules and what the agent (package agent) does.
package nodemanager
