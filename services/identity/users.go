package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// MinPasswordLength is the shortest password accepted.
const MinPasswordLength = 12

func userID(name string) string { return strings.TrimPrefix(name, "users/") }

func userSubject(u *identityv1.StoredUser) auth.Subject {
	return auth.Subject{Principal: u.GetUser().GetName(), UID: u.GetUser().GetUid(), Gen: u.GetCredentialGeneration()}
}

// publicUser is the user as the API shows it: no password of any kind.
func publicUser(it etcdstore.Item[*identityv1.StoredUser]) *identityv1.User {
	u := proto.Clone(it.Msg.GetUser()).(*identityv1.User)
	u.Password, u.TemporaryPassword = "", ""
	u.Etag = it.Etag
	return u
}

// MaxPasswordBytes is bcrypt's limit: it reads no more of a password, so a
// longer one is refused rather than cut short without a word.
const MaxPasswordBytes = 72

func checkPassword(field, p string) error {
	if len(p) < MinPasswordLength {
		return apierr.InvalidField(field, "must be at least 12 characters")
	}
	if len(p) > MaxPasswordBytes {
		return apierr.InvalidField(field, fmt.Sprintf("must be at most %d bytes (UTF-8)", MaxPasswordBytes))
	}
	return nil
}

// CreateUser creates a local user whose password is temporary.
func (s *Server) CreateUser(ctx context.Context, req *identityv1.CreateUserRequest) (*identityv1.User, error) {
	if err := checkID("user_id", req.GetUserId()); err != nil {
		return nil, err
	}
	in := req.GetUser()
	email := strings.ToLower(strings.TrimSpace(in.GetEmail()))
	if at := strings.Index(email, "@"); at < 1 || at == len(email)-1 {
		return nil, apierr.InvalidField("user.email", "must be an email address")
	}
	password, generated := in.GetPassword(), false
	if password == "" {
		password, generated = randomSecret(18), true
	} else if err := checkPassword("user.password", password); err != nil {
		return nil, err
	}
	name := "users/" + req.GetUserId()
	all, _, err := s.users.ListAll(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, it := range all {
		if it.Msg.GetUser().GetEmail() == email {
			return nil, apierr.AlreadyExists(apierr.User, it.Msg.GetUser().GetName())
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
	if err != nil {
		return nil, err
	}
	now := s.timestamp()
	stored := &identityv1.StoredUser{PasswordHash: string(hash), CredentialGeneration: 1, User: &identityv1.User{
		Name: name, Uid: newUID(), Email: email, DisplayName: in.GetDisplayName(), Groups: in.GetGroups(),
		PasswordChangeRequired: true, CreateTime: now, UpdateTime: now}}
	// The email's index key is created with the user: of two creates with
	// one email, one fails (the list above can miss the other).
	it, err := s.users.WriteIndexed(ctx, req.GetUserId(), stored, 0, userIndexKeys(stored)...)
	if err != nil {
		return nil, storeErr(err, apierr.User, name)
	}
	out := publicUser(it)
	if generated {
		out.TemporaryPassword = password
	}
	return out, nil
}

// GetUser returns a user.
func (s *Server) GetUser(ctx context.Context, req *identityv1.GetUserRequest) (*identityv1.User, error) {
	it, err := s.getUser(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return publicUser(it), nil
}

func (s *Server) getUser(ctx context.Context, name string) (etcdstore.Item[*identityv1.StoredUser], error) {
	if !strings.HasPrefix(name, "users/") || checkID("name", userID(name)) != nil {
		return etcdstore.Item[*identityv1.StoredUser]{}, apierr.InvalidField("name", "must be users/{user}")
	}
	it, err := s.users.Get(ctx, userID(name))
	if err != nil {
		return it, storeErr(err, apierr.User, name)
	}
	return it, nil
}

// ListUsers lists users by name, with the documented filter.
func (s *Server) ListUsers(ctx context.Context, req *identityv1.ListUsersRequest) (*identityv1.ListUsersResponse, error) {
	f, err := parseFilter(req.GetFilter(), map[string]bool{"email": true, "groups": true})
	if err != nil {
		return nil, err
	}
	page, err := s.users.List(ctx, "", etcdstore.PageSize(int(req.GetPageSize())), req.GetPageToken())
	if err != nil {
		return nil, listErr(err)
	}
	out := &identityv1.ListUsersResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		u := it.Msg.GetUser()
		if f.matches(map[string][]string{"email": {u.GetEmail()}, "groups": u.GetGroups()}) {
			out.Users = append(out.Users, publicUser(it))
		}
	}
	return out, nil
}

// DeleteUser deletes a user, the access rules naming it and its user
// applications, in one transaction; its tokens and its applications' stop
// working as they are gone.
func (s *Server) DeleteUser(ctx context.Context, req *identityv1.DeleteUserRequest) (*emptypb.Empty, error) {
	it, err := s.getUser(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	apps, _, err := s.apps.ListAll(ctx, "")
	if err != nil {
		return nil, err
	}
	also, err := s.userIndexes(ctx, it)
	if err != nil {
		return nil, err
	}
	for _, a := range apps {
		if userApp(a.Msg.GetApplication()) && a.Msg.GetApplication().GetCreator() == req.GetName() {
			also = append(also, s.apps.Key(a.ID), clientIDKey(a.Msg.GetApplication().GetClientId()))
		}
	}
	if err := s.deleteSubject(ctx, s.users.Key(it.ID), it.Etag, it.Revision, identityv1.SubjectKind_SUBJECT_KIND_USER, req.GetName(), req.GetEtag(), also...); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// ResetUserPassword gives a local user a new temporary password.
func (s *Server) ResetUserPassword(ctx context.Context, req *identityv1.ResetUserPasswordRequest) (*identityv1.User, error) {
	it, err := s.getUser(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if it.Msg.GetUser().GetIdentityProvider() != "" {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, req.GetName(),
			"An SSO user has no password here; reset it at the identity provider.")
	}
	if req.GetEtag() != "" && req.GetEtag() != it.Etag {
		return nil, apierr.EtagMismatch(req.GetName(), it.Etag)
	}
	password := randomSecret(18)
	if err := s.setPassword(ctx, it, password, true); err != nil {
		return nil, err
	}
	it, err = s.getUser(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	out := publicUser(it)
	out.TemporaryPassword = password
	return out, nil
}

// setPassword stores a new password hash and generation (so tokens issued
// before stop working), if the user is unchanged since it was read.
func (s *Server) setPassword(ctx context.Context, it etcdstore.Item[*identityv1.StoredUser], password string, temporary bool) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
	if err != nil {
		return err
	}
	next := proto.Clone(it.Msg).(*identityv1.StoredUser)
	next.PasswordHash = string(hash)
	next.CredentialGeneration++
	next.User.PasswordChangeRequired = temporary
	next.User.UpdateTime = s.timestamp()
	if _, err := s.users.Update(ctx, it.ID, next, it.Etag); err != nil {
		return storeErr(err, apierr.User, it.Msg.GetUser().GetName())
	}
	return nil
}

// deleteSubject deletes a user or application (at key, read at etag and
// rev), every access rule naming it and the keys also, in one transaction
// that fails if any of the first two changed since it was read; sentEtag is
// the request's.
func (s *Server) deleteSubject(ctx context.Context, key, etag string, rev int64, kind identityv1.SubjectKind, name, sentEtag string, also ...string) error {
	if sentEtag != "" && sentEtag != etag {
		return apierr.EtagMismatch(name, etag)
	}
	b := etcdstore.NewBatch(s.client).DeleteIf(key, rev)
	for _, k := range also {
		b.Delete(k)
	}
	rules, _, err := s.rules.ListAll(ctx, "")
	if err != nil {
		return err
	}
	for _, r := range rules {
		if r.Msg.GetSubject().GetKind() == kind && r.Msg.GetSubject().GetName() == name {
			b.DeleteIf(s.rules.Key(r.ID), r.Revision)
		}
	}
	if _, err := b.Commit(ctx); err != nil {
		if errors.Is(err, etcdstore.ErrConflict) {
			return apierr.EtagMismatch(name, "")
		}
		return err
	}
	return nil
}

func listErr(err error) error {
	if errors.Is(err, etcdstore.ErrInvalidPageToken) || errors.Is(err, etcdstore.ErrPageTokenExpired) {
		return apierr.InvalidPageToken()
	}
	return err
}
