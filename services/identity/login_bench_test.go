package identity_test

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/identity"
)

// A wrong password for a known name and any password for an unknown one
// cost alike (the unknown is compared with a decoy hash at the same cost):
// compare known and unknown ns/op, at bcrypt's default cost.
func BenchmarkLoginKnownVsUnknownName(b *testing.B) {
	cluster := etcdtest.New(b)
	guard, err := auth.New(b.Context(), auth.Config{}, auth.Deps{Client: cluster.Client})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := identity.New(identity.Config{BcryptCost: bcrypt.DefaultCost}, identity.Deps{Client: cluster.Client, Guard: guard})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Bootstrap(b.Context()); err != nil {
		b.Fatal(err)
	}
	for _, who := range []string{"nobody@runway.local", "admin@runway.local"} {
		b.Run(map[bool]string{true: "known", false: "unknown"}[who == "admin@runway.local"], func(b *testing.B) {
			req := &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
				Password: &identityv1.PasswordCredentials{User: who, Password: "not the password"}}}
			for b.Loop() {
				if _, err := svc.Login(b.Context(), req); err == nil {
					b.Fatal("a wrong password signed in")
				}
				b.StopTimer() // the throttle would lock the name out
				if _, err := cluster.Client.Delete(b.Context(), etcdstore.PrefixSignInFailures, clientv3.WithPrefix()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
