package auth

import "strings"

// CallerOf is principal (users/{user}) as a decision sees it now, from the
// mirrors: its groups and uid. It is false for a user that no longer
// exists. Services deciding for someone who is not calling (a notification
// sent to its subscriber) ask Allowed with it.
func (g *Guard) CallerOf(principal string) (Caller, bool) {
	id, ok := strings.CutPrefix(principal, "users/")
	if !ok {
		return Caller{}, false
	}
	if _, ok := g.users.get(id); !ok {
		return Caller{}, false
	}
	return g.caller(principal, g.now()), true
}
