package metrics

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/history"
)

// Bounds on reports.
const (
	// MaxReportsPerCreator is how many reports one principal may keep.
	MaxReportsPerCreator = 100
	// MaxReportWindow is the longest window a report may cover.
	MaxReportWindow = 400 * 24 * time.Hour
	// MaxCSVBytes is the largest CSV a report may have. A download is one
	// gRPC message, and its readers (the SDK, the front door, the REST
	// gateway) take gRPC's default 4 MiB; a report that would be larger
	// fails, and a stored CSV that is larger is refused unread.
	MaxCSVBytes = 4<<20 - 1<<10
)

// ReportDeps are the report service's collaborators.
type ReportDeps struct {
	Client *clientv3.Client // reports' records. Required.
	Blobs  blob.Store       // reports' CSVs. Required.
	Source history.Source   // what reports are computed from. Required.
	Guard  *auth.Guard      // who may see which report. Required.
	// Interval is the history's sampling interval: what a series of one
	// sample stands for (Compute integrates over the samples' timestamps).
	Interval time.Duration
	// MaxCSVBytes bounds a report's CSV; 0 means MaxCSVBytes.
	MaxCSVBytes int64
	Logger      *slog.Logger
	Now         func() time.Time
}

// Reports is the ReportService and its background computation (Run).
type Reports struct {
	metricsv1.UnimplementedReportServiceServer
	d       ReportDeps
	reports *etcdstore.Collection[*metricsv1.Report]
	wake    chan struct{}
}

// NewReports returns the service.
func NewReports(d ReportDeps) (*Reports, error) {
	if d.Client == nil || d.Blobs == nil || d.Source == nil || d.Guard == nil || d.Interval <= 0 {
		return nil, errors.New("metrics: ReportDeps needs Client, Blobs, Source, Guard and Interval")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.MaxCSVBytes <= 0 {
		d.MaxCSVBytes = MaxCSVBytes
	}
	return &Reports{d: d, wake: make(chan struct{}, 1),
		reports: etcdstore.NewCollection(d.Client, etcdstore.PrefixReports, func() *metricsv1.Report { return new(metricsv1.Report) })}, nil
}

// Register adds the service to a gRPC server.
func (s *Reports) Register(g *grpc.Server) { metricsv1.RegisterReportServiceServer(g, s) }

// RegisterGateway adds the REST routes, forwarding to conn.
func (s *Reports) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return metricsv1.RegisterReportServiceHandler(ctx, mux, conn)
}

func blobKey(id string) string { return blobPrefix + id + ".csv" }

// blobPrefix is the reports' CSVs' part of the blob store.
const blobPrefix = "reports/"

// CreateReport validates and stores a PENDING report, and wakes the
// computation.
func (s *Reports) CreateReport(ctx context.Context, req *metricsv1.CreateReportRequest) (*metricsv1.Report, error) {
	c, _ := auth.CallerFrom(ctx)
	r := req.GetReport()
	if err := s.validate(r); err != nil {
		return nil, err
	}
	id := req.GetReportId()
	if id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = "r-" + hex.EncodeToString(b[:])
	} else if !clusterproto.ValidID(id) {
		return nil, apierr.InvalidField("report_id", "must be lower-case letters, digits and dashes, at most 63")
	}
	all, _, err := s.reports.ListAll(ctx, "")
	if err != nil {
		return nil, storeErr(err, "reports/"+id)
	}
	mine := 0
	for _, it := range all {
		if it.Msg.GetCreator() == c.Principal {
			mine++
		}
	}
	if mine >= MaxReportsPerCreator {
		return nil, apierr.QuotaExceeded(c.Principal, "keep at most 100 reports: delete some first")
	}
	var uid [8]byte
	_, _ = rand.Read(uid[:])
	out := &metricsv1.Report{Name: "reports/" + id, Uid: hex.EncodeToString(uid[:]),
		DisplayName: r.GetDisplayName(), Description: r.GetDescription(), StartTime: r.GetStartTime(), EndTime: r.GetEndTime(),
		Project: r.GetProject(), Department: r.GetDepartment(), SegmentBy: r.GetSegmentBy(),
		State: metricsv1.ReportState_REPORT_STATE_PENDING, Creator: c.Principal, CreateTime: timestamppb.New(s.d.Now())}
	it, err := s.reports.Create(ctx, id, out)
	if errors.Is(err, etcdstore.ErrAlreadyExists) && req.GetReportId() != "" {
		return nil, s.taken(ctx, out.Name)
	}
	if err != nil {
		return nil, storeErr(err, out.Name)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return withEtag(it), nil
}

func (s *Reports) validate(r *metricsv1.Report) error {
	var v []apierr.FieldViolation
	bad := func(field, what string) { v = append(v, apierr.FieldViolation{Field: field, Description: what}) }
	switch n := len(r.GetDisplayName()); {
	case n == 0:
		bad("report.display_name", "is required")
	case n > 100:
		bad("report.display_name", "must be at most 100 characters")
	}
	if len(r.GetDescription()) > 1000 {
		bad("report.description", "must be at most 1000 characters")
	}
	start, end := r.GetStartTime(), r.GetEndTime()
	switch {
	case start == nil || end == nil:
		bad("report.end_time", "start_time and end_time are required")
	case !end.AsTime().After(start.AsTime()):
		bad("report.end_time", "must be after start_time")
	case end.AsTime().Sub(start.AsTime()) > MaxReportWindow:
		bad("report.end_time", "must be at most 400 days after start_time")
	case end.AsTime().After(s.d.Now().Add(time.Minute)):
		bad("report.end_time", "must not be in the future")
	}
	if p := r.GetProject(); p != "" {
		if id, ok := strings.CutPrefix(p, "projects/"); !ok || !clusterproto.ValidID(id) {
			bad("report.project", "must be projects/{project}")
		}
	}
	if d := r.GetDepartment(); d != "" {
		if id, ok := strings.CutPrefix(d, "departments/"); !ok || !clusterproto.ValidID(id) {
			bad("report.department", "must be departments/{department}")
		}
		if r.GetProject() != "" {
			bad("report.department", "give a project or a department, not both")
		}
	}
	if _, ok := metricsv1.ReportSegment_name[int32(r.GetSegmentBy())]; !ok || r.GetSegmentBy() == metricsv1.ReportSegment_REPORT_SEGMENT_UNSPECIFIED {
		bad("report.segment_by", "must be PROJECT, DEPARTMENT or NODE_POOL")
	}
	if len(v) > 0 {
		return apierr.Invalid(v...)
	}
	return nil
}

// taken is the answer to a report id already in use. Ids are one space for
// all, so a report the caller may not see answers neither AlreadyExists
// nor its name (which would say that another user keeps a report of that
// id, as GetReport's NotFound does not): only that the id cannot be used,
// the same for every id the caller does not hold.
func (s *Reports) taken(ctx context.Context, name string) error {
	if it, err := s.reports.Get(ctx, strings.TrimPrefix(name, "reports/")); err == nil && s.visible(ctx, it.Msg) {
		return apierr.AlreadyExists(apierr.Report, name)
	}
	return apierr.InvalidField("report_id", "is not available: choose another, or leave it empty for a generated one")
}

// visible: a report is its creator's; those who view projects on the whole
// account see every report.
func (s *Reports) visible(ctx context.Context, r *metricsv1.Report) bool {
	c, ok := auth.CallerFrom(ctx)
	if !ok {
		return false
	}
	if c.Principal == r.GetCreator() {
		return true
	}
	all, _ := s.d.Guard.Allowed(c, auth.Permission{Entity: auth.Projects, Action: auth.View},
		auth.Target{Level: auth.AccountLevel, Resource: r.GetName()}, func() (auth.Attrs, error) { return auth.Attrs{}, nil })
	return all
}

// get reads a report the caller may see; one it may not is NotFound, so
// that names of others' reports cannot be probed.
func (s *Reports) get(ctx context.Context, name string) (etcdstore.Item[*metricsv1.Report], error) {
	id, ok := strings.CutPrefix(name, "reports/")
	if !ok || !clusterproto.ValidID(id) {
		return etcdstore.Item[*metricsv1.Report]{}, apierr.InvalidField("name", "must be reports/{report}")
	}
	it, err := s.reports.Get(ctx, id)
	if err != nil {
		return it, storeErr(err, name)
	}
	if !s.visible(ctx, it.Msg) {
		return it, apierr.NotFound(apierr.Report, name)
	}
	return it, nil
}

// GetReport reads one report.
func (s *Reports) GetReport(ctx context.Context, req *metricsv1.GetReportRequest) (*metricsv1.Report, error) {
	it, err := s.get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return withEtag(it), nil
}

// ListReports lists the reports the caller may see, newest first.
func (s *Reports) ListReports(ctx context.Context, req *metricsv1.ListReportsRequest) (*metricsv1.ListReportsResponse, error) {
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, apierr.InvalidField("page_size", "must not be negative")
	case size == 0:
		size = 50
	case size > 500:
		size = 500
	}
	after := ""
	if t := req.GetPageToken(); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		if err != nil {
			return nil, apierr.InvalidPageToken()
		}
		after = string(b)
	}
	all, _, err := s.reports.ListAll(ctx, "")
	if err != nil {
		return nil, storeErr(err, "reports")
	}
	var mine []*metricsv1.Report
	for _, it := range all {
		if s.visible(ctx, it.Msg) {
			mine = append(mine, withEtag(it))
		}
	}
	// Newest first; the name breaks ties, and is the page token's key.
	key := func(r *metricsv1.Report) string {
		return r.GetCreateTime().AsTime().Format(time.RFC3339Nano) + " " + r.GetName()
	}
	sort.Slice(mine, func(i, j int) bool { return key(mine[i]) > key(mine[j]) })
	out := &metricsv1.ListReportsResponse{}
	for _, r := range mine {
		if after != "" && key(r) >= after {
			continue
		}
		if len(out.Reports) == size {
			out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(key(out.Reports[size-1])))
			break
		}
		out.Reports = append(out.Reports, r)
	}
	return out, nil
}

// DownloadReport returns a READY report's CSV.
func (s *Reports) DownloadReport(ctx context.Context, req *metricsv1.DownloadReportRequest) (*metricsv1.DownloadReportResponse, error) {
	it, err := s.get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if it.Msg.GetState() != metricsv1.ReportState_REPORT_STATE_READY {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_REPORT_NOT_READY, req.GetName(),
			"The report is "+strings.ToLower(strings.TrimPrefix(it.Msg.GetState().String(), "REPORT_STATE_"))+"; download it once it is ready.")
	}
	b, err := s.d.Blobs.Get(ctx, blobKey(it.ID), s.d.MaxCSVBytes)
	if errors.Is(err, blob.ErrTooLarge) {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_REPORT_NOT_READY, req.GetName(),
			fmt.Sprintf("The report's stored CSV is larger than one download carries (%d bytes); delete it and report on a shorter window.", s.d.MaxCSVBytes)).WithCause(err)
	}
	if err != nil {
		return nil, err
	}
	return &metricsv1.DownloadReportResponse{Csv: string(b)}, nil
}

// DeleteReport deletes a report's record, then its CSV.
func (s *Reports) DeleteReport(ctx context.Context, req *metricsv1.DeleteReportRequest) (*emptypb.Empty, error) {
	it, err := s.get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	etag := req.GetEtag()
	if etag == "" {
		etag = it.Etag
	}
	if _, err := s.reports.Delete(ctx, it.ID, etag); err != nil {
		return nil, storeErr(err, req.GetName())
	}
	if err := s.d.Blobs.Delete(ctx, blobKey(it.ID)); err != nil {
		s.d.Logger.Warn("report: CSV left behind", "report", req.GetName(), "err", err)
	}
	return &emptypb.Empty{}, nil
}

// sweepEvery is how often Run removes the CSVs of reports that are gone.
const sweepEvery = time.Hour

// Run computes PENDING reports, oldest first, one at a time, until ctx
// ends: on every CreateReport and every few seconds (another replica's, or
// one left by a restart). On start and every sweepEvery it sweeps.
func (s *Reports) Run(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	var swept time.Time
	for {
		if time.Since(swept) >= sweepEvery {
			s.sweep(ctx)
			swept = time.Now()
		}
		s.computePending(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// sweep deletes the CSVs whose report is gone: a DeleteReport whose CSV
// delete failed, or a computation that ended after its report was
// deleted. The CSVs are listed before the reports, so each listed CSV's
// report was created before the reports are listed, and is among them
// unless it was deleted.
func (s *Reports) sweep(ctx context.Context) {
	keys, err := s.d.Blobs.List(ctx, blobPrefix)
	if err != nil {
		if ctx.Err() == nil {
			s.d.Logger.Warn("reports: list CSVs", "err", err)
		}
		return
	}
	all, _, err := s.reports.ListAll(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			s.d.Logger.Warn("reports: list", "err", err)
		}
		return
	}
	live := make(map[string]bool, len(all))
	for _, it := range all {
		live[blobKey(it.ID)] = true
	}
	for _, k := range keys {
		if live[k] {
			continue
		}
		if err := s.d.Blobs.Delete(ctx, k); err != nil {
			s.d.Logger.Warn("reports: CSV of a deleted report left behind", "key", k, "err", err)
		}
	}
}

func (s *Reports) computePending(ctx context.Context) {
	all, _, err := s.reports.ListAll(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			s.d.Logger.Warn("reports: list", "err", err)
		}
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Revision < all[j].Revision })
	for _, it := range all {
		if ctx.Err() != nil {
			return
		}
		if it.Msg.GetState() == metricsv1.ReportState_REPORT_STATE_PENDING {
			s.compute(ctx, it)
		}
	}
}

// compute writes the CSV, then marks the report READY (or FAILED) if it is
// unchanged since it was read: a report deleted meanwhile stays deleted.
func (s *Reports) compute(ctx context.Context, it etcdstore.Item[*metricsv1.Report]) {
	r := it.Msg
	rows, err := Compute(ctx, s.d.Source, r, s.d.Interval)
	var b []byte
	if err == nil {
		b, err = CSVWithin(rows, s.d.MaxCSVBytes)
	}
	if err == nil {
		err = s.d.Blobs.Put(ctx, blobKey(it.ID), b)
	}
	if ctx.Err() != nil {
		return
	}
	r.CompleteTime = timestamppb.New(s.d.Now())
	if err != nil {
		r.State, r.ErrorMessage = metricsv1.ReportState_REPORT_STATE_FAILED, err.Error()
	} else {
		r.State, r.RowCount = metricsv1.ReportState_REPORT_STATE_READY, int32(len(rows))
	}
	if _, err := s.reports.Update(ctx, it.ID, r, it.Etag); err != nil && ctx.Err() == nil {
		s.d.Logger.Warn("report: not marked done", "report", r.GetName(), "err", err)
	}
}

func withEtag(it etcdstore.Item[*metricsv1.Report]) *metricsv1.Report {
	r := it.Msg
	r.Etag = it.Etag
	return r
}

func storeErr(err error, name string) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, etcdstore.ErrNotFound):
		return apierr.NotFound(apierr.Report, name)
	case errors.Is(err, etcdstore.ErrAlreadyExists):
		return apierr.AlreadyExists(apierr.Report, name)
	case errors.Is(err, etcdstore.ErrEtagMismatch):
		return apierr.EtagMismatch(name, "")
	}
	return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second).WithCause(err)
}
