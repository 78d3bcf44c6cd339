package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

func appID(name string) string { return strings.TrimPrefix(name, "applications/") }

func secretHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func secretMatches(hash, secret string) bool {
	return subtle.ConstantTimeCompare([]byte(hash), []byte(secretHash(secret))) == 1
}

func publicApp(it etcdstore.Item[*identityv1.StoredApplication]) *identityv1.Application {
	a := proto.Clone(it.Msg.GetApplication()).(*identityv1.Application)
	a.ClientSecret = ""
	a.Etag = it.Etag
	return a
}

// userApp reports whether a is a user application (UNSPECIFIED, from
// before the kinds, is one: it acted for its creator).
func userApp(a *identityv1.Application) bool {
	return a.GetKind() != identityv1.ApplicationKind_APPLICATION_KIND_MANAGED
}

// CreateApplication creates a user application (the caller's own, acting
// with its access) or an application managed under Access (holding only
// the rules granted to it); pkg/auth decides who may create which.
func (s *Server) CreateApplication(ctx context.Context, req *identityv1.CreateApplicationRequest) (*identityv1.Application, error) {
	if err := checkID("application_id", req.GetApplicationId()); err != nil {
		return nil, err
	}
	kind := req.GetApplication().GetKind()
	if kind == identityv1.ApplicationKind_APPLICATION_KIND_UNSPECIFIED {
		kind = identityv1.ApplicationKind_APPLICATION_KIND_USER
	}
	c, _ := auth.CallerFrom(ctx)
	if !strings.HasPrefix(c.Principal, "users/") {
		// Only users own applications (an application cannot make more).
		return nil, apierr.PermissionDenied("applications.create", "applications/"+req.GetApplicationId())
	}
	creator, err := s.users.Get(ctx, userID(c.Principal))
	if err != nil {
		return nil, storeErr(err, apierr.User, c.Principal)
	}
	if kind == identityv1.ApplicationKind_APPLICATION_KIND_USER {
		all, _, err := s.apps.ListAll(ctx, "")
		if err != nil {
			return nil, err
		}
		owned := 0
		for _, it := range all {
			if a := it.Msg.GetApplication(); userApp(a) && a.GetCreator() == c.Principal {
				owned++
			}
		}
		if owned >= MaxApplicationsPerUser {
			return nil, apierr.ApplicationLimit(c.Principal, MaxApplicationsPerUser)
		}
	}
	name := "applications/" + req.GetApplicationId()
	secret := randomSecret(32)
	now := s.timestamp()
	stored := &identityv1.StoredApplication{SecretHash: secretHash(secret), CredentialGeneration: 1,
		CreatorUid: creator.Msg.GetUser().GetUid(),
		Application: &identityv1.Application{Name: name, Uid: newUID(), DisplayName: req.GetApplication().GetDisplayName(),
			ClientId: newUID(), SecretCreateTime: now, CreateTime: now, UpdateTime: now, Creator: c.Principal, Kind: kind}}
	it, err := s.apps.WriteIndexed(ctx, req.GetApplicationId(), stored, 0, clientIDKey(stored.GetApplication().GetClientId()))
	if err != nil {
		return nil, storeErr(err, apierr.Application, name)
	}
	out := publicApp(it)
	out.ClientSecret = secret
	return out, nil
}

func (s *Server) getApp(ctx context.Context, name string) (etcdstore.Item[*identityv1.StoredApplication], error) {
	if !strings.HasPrefix(name, "applications/") || checkID("name", appID(name)) != nil {
		return etcdstore.Item[*identityv1.StoredApplication]{}, apierr.InvalidField("name", "must be applications/{application}")
	}
	it, err := s.apps.Get(ctx, appID(name))
	if err != nil {
		return it, storeErr(err, apierr.Application, name)
	}
	return it, nil
}

// GetApplication returns an application without its secret.
func (s *Server) GetApplication(ctx context.Context, req *identityv1.GetApplicationRequest) (*identityv1.Application, error) {
	it, err := s.getApp(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return publicApp(it), nil
}

// ListApplications lists applications without their secrets (pkg/auth
// keeps only the caller's own unless it administers applications).
func (s *Server) ListApplications(ctx context.Context, req *identityv1.ListApplicationsRequest) (*identityv1.ListApplicationsResponse, error) {
	page, err := s.apps.List(ctx, "", etcdstore.PageSize(int(req.GetPageSize())), req.GetPageToken())
	if err != nil {
		return nil, listErr(err)
	}
	out := &identityv1.ListApplicationsResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		out.Applications = append(out.Applications, publicApp(it))
	}
	return out, nil
}

// DeleteApplication deletes an application and the access rules naming it.
func (s *Server) DeleteApplication(ctx context.Context, req *identityv1.DeleteApplicationRequest) (*emptypb.Empty, error) {
	it, err := s.getApp(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if err := s.deleteSubject(ctx, s.apps.Key(it.ID), it.Etag, it.Revision, identityv1.SubjectKind_SUBJECT_KIND_APPLICATION,
		req.GetName(), req.GetEtag(), clientIDKey(it.Msg.GetApplication().GetClientId())); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// RegenerateApplicationSecret replaces the secret; tokens obtained with the
// old one stop working (the credential generation changes).
func (s *Server) RegenerateApplicationSecret(ctx context.Context, req *identityv1.RegenerateApplicationSecretRequest) (*identityv1.Application, error) {
	it, err := s.getApp(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if req.GetEtag() != "" && req.GetEtag() != it.Etag {
		return nil, apierr.EtagMismatch(req.GetName(), it.Etag)
	}
	secret := randomSecret(32)
	next := proto.Clone(it.Msg).(*identityv1.StoredApplication)
	next.SecretHash = secretHash(secret)
	next.CredentialGeneration++
	now := s.timestamp()
	next.Application.SecretCreateTime, next.Application.UpdateTime = now, now
	updated, err := s.apps.Update(ctx, it.ID, next, it.Etag)
	if err != nil {
		return nil, storeErr(err, apierr.Application, req.GetName())
	}
	out := publicApp(updated)
	out.ClientSecret = secret
	return out, nil
}
