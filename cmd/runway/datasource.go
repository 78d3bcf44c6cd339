package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// dataSourceTypes are the CLI's names of the data source types.
var dataSourceTypes = []string{"host-path", "nfs", "pvc", "git", "s3", "config-map", "secret"}

// dataSourceFlags are the fields of a data source to create.
type dataSourceFlags struct {
	s                                           scopeFlags
	desc, mount, path, server, claim, class     string
	size, repository, revision, credential, obj string
	endpoint, bucket, prefix                    string
	readOnly, deleteWithWorkload                bool
}

// dataSourceCommand manages data sources: data workloads mount at a path.
func dataSourceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "datasource", Aliases: []string{"datasources", "data-source"},
		Short: "Data sources: node directories, NFS exports, claims, git repositories and buckets workloads mount"}
	var f dataSourceFlags
	create := &cobra.Command{
		Use:   "create TYPE NAME [-p PROJECT | --department D] --mount PATH ...",
		Short: "Create a data source (" + strings.Join(dataSourceTypes, ", ") + ")",
		Long: `Create a data source, mounted at --mount in the pods of the workloads that
name it (submit --data-source NAME); --read-only makes writes fail there.

  host-path   --path DIR: a directory of the node (an account administrator's
              only: it reaches the host)
  nfs         --nfs-server HOST --path EXPORT
  pvc         --claim-name NAME (an existing claim), or --storage-class CLASS
              --size 10G [--delete-with-workload] (a claim made per workload)
  git         --repository URL [--revision BRANCH|TAG|COMMIT] [--credential GIT]:
              cloned before the command starts; the commit is in the events
  s3          --endpoint URL --bucket B [--prefix P] [--credential S3-KEYS]
  config-map  --object NAME: a ConfigMap of the project's namespace (Kubernetes)
  secret      --object NAME: a Secret of the project's namespace (Kubernetes)`,
		Example: `  runway datasource create host-path imagenet --mount /data --path /srv/imagenet --read-only
  runway datasource create nfs shared --department research --mount /shared --nfs-server nfs.example.com --path /exports/shared
  runway datasource create git code -p team-a --mount /src --repository https://github.com/org/repo.git --revision main --credential gh`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := f.s.scope()
			if err != nil {
				return err
			}
			d, err := f.dataSource(args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.CreateDataSource(ctx, scope, args[1], d)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "data source %q created\n", got.GetName())
				return nil
			})
		},
	}
	f.s.add(create)
	f.addFlags(create.Flags())
	_ = create.MarkFlagRequired("mount")

	var ds scopeFlags
	var output string
	describe := &cobra.Command{
		Use:     "describe NAME [-p PROJECT | --department D]",
		Short:   "Show a data source",
		Example: "  runway datasource describe imagenet\n  runway datasource describe code -p team-a -o yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := ds.scope()
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				d, err := c.GetDataSource(ctx, scope, args[0])
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, d)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Name:        %s\nType:        %s\nSource:      %s\nMount:       %s\nRead-only:   %t\nDescription: %s\nCreator:     %s\nCreated:     %s\n",
					d.GetName(), dataSourceType(d), dataSourceWhat(d), d.GetMountPath(), d.GetReadOnly(),
					orDefault(d.GetDescription(), "-"), orDefault(d.GetCreator(), "-"), d.GetCreateTime().AsTime().Format("2006-01-02 15:04:05 MST"))
				return nil
			})
		},
	}
	ds.add(describe)
	outputFlag(describe, &output)

	list := assetListCommand("data source", func(ctx context.Context, c *sdk.Client, scope sdk.Scope, w io.Writer, output string) error {
		items, err := sdk.Collect(c.DataSources(ctx, scope))
		if err != nil || output != formatTable {
			return orPrint(err, w, output, items)
		}
		t := newTable(w, "Data source", "Type", "Source", "Mount", "Read-only")
		for _, d := range items {
			t.row(d.GetName(), dataSourceType(d), dataSourceWhat(d), d.GetMountPath(), fmt.Sprint(d.GetReadOnly()))
		}
		return t.flush()
	})
	del := assetDeleteCommand("data source", func(ctx context.Context, c *sdk.Client, s sdk.Scope, id string) (string, error) {
		return s.DataSourceName(id), c.DeleteDataSource(ctx, s, id)
	})
	cmd.AddCommand(create, describe, list, del)
	return cmd
}

func (f *dataSourceFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.mount, "mount", "", "the absolute path in the container (required)")
	fl.BoolVar(&f.readOnly, "read-only", false, "mount it read-only")
	fl.StringVar(&f.desc, "description", "", "free text for people")
	fl.StringVar(&f.path, "path", "", "host-path: the node's directory; nfs: the export's path")
	fl.StringVar(&f.server, "nfs-server", "", "nfs: the server's host name or IPv4 address")
	fl.StringVar(&f.claim, "claim-name", "", "pvc: an existing claim")
	fl.StringVar(&f.class, "storage-class", "", "pvc: the storage class of a claim made per workload")
	fl.StringVar(&f.size, "size", "", "pvc: the size of a claim made per workload, such as 10G")
	fl.BoolVar(&f.deleteWithWorkload, "delete-with-workload", false, "pvc: delete the claim made for a workload with its pods (default: kept)")
	fl.StringVar(&f.repository, "repository", "", "git: the repository's https:// URL")
	fl.StringVar(&f.revision, "revision", "", "git: a branch, tag or commit (default: the default branch)")
	fl.StringVar(&f.credential, "credential", "", "git: a git credential (token); s3: an s3-keys credential")
	fl.StringVar(&f.endpoint, "endpoint", "", "s3: the endpoint URL")
	fl.StringVar(&f.bucket, "bucket", "", "s3: the bucket")
	fl.StringVar(&f.prefix, "prefix", "", "s3: the key prefix")
	fl.StringVar(&f.obj, "object", "", "config-map, secret: the object's name in the project's namespace")
}

// dataSource builds the data source of type typ from the flags.
func (f *dataSourceFlags) dataSource(typ string) (*workloadv1.DataSource, error) {
	d := &workloadv1.DataSource{Description: f.desc, MountPath: f.mount, ReadOnly: f.readOnly}
	switch typ {
	case "host-path":
		d.Source = &workloadv1.DataSource_HostPath{HostPath: &workloadv1.HostPathSource{Path: f.path}}
	case "nfs":
		d.Source = &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: f.server, Path: f.path}}
	case "pvc":
		p := &workloadv1.PvcSource{ClaimName: f.claim, StorageClass: f.class}
		if f.size != "" {
			n, err := parseBytes(f.size)
			if err != nil {
				return nil, usageError("--size: %v", err)
			}
			p.SizeBytes = n
		}
		if f.deleteWithWorkload {
			p.Lifetime = workloadv1.PvcLifetime_PVC_LIFETIME_DELETED_WITH_WORKLOAD
		} else if f.class != "" {
			p.Lifetime = workloadv1.PvcLifetime_PVC_LIFETIME_KEPT
		}
		d.Source = &workloadv1.DataSource_Pvc{Pvc: p}
	case "git":
		d.Source = &workloadv1.DataSource_Git{Git: &workloadv1.GitSource{Repository: f.repository, Revision: f.revision, Credential: f.credential}}
	case "s3":
		d.Source = &workloadv1.DataSource_S3{S3: &workloadv1.S3Source{Endpoint: f.endpoint, Bucket: f.bucket, Prefix: f.prefix, Credential: f.credential}}
	case "config-map":
		d.Source = &workloadv1.DataSource_ConfigMap{ConfigMap: &workloadv1.ConfigMapSource{Name: f.obj}}
	case "secret":
		d.Source = &workloadv1.DataSource_Secret{Secret: &workloadv1.SecretSource{Name: f.obj}}
	default:
		return nil, usageError("data source type %q: want %s", typ, strings.Join(dataSourceTypes, ", "))
	}
	return d, nil
}

// dataSourceType is the CLI's name of a data source's type.
func dataSourceType(d *workloadv1.DataSource) string {
	switch d.GetSource().(type) {
	case *workloadv1.DataSource_HostPath:
		return "host-path"
	case *workloadv1.DataSource_Nfs:
		return "nfs"
	case *workloadv1.DataSource_Pvc:
		return "pvc"
	case *workloadv1.DataSource_Git:
		return "git"
	case *workloadv1.DataSource_S3:
		return "s3"
	case *workloadv1.DataSource_ConfigMap:
		return "config-map"
	case *workloadv1.DataSource_Secret:
		return "secret"
	}
	return "-"
}

// dataSourceWhat says in one cell what a data source mounts.
func dataSourceWhat(d *workloadv1.DataSource) string {
	switch {
	case d.GetHostPath() != nil:
		return d.GetHostPath().GetPath()
	case d.GetNfs() != nil:
		return d.GetNfs().GetServer() + ":" + d.GetNfs().GetPath()
	case d.GetPvc().GetClaimName() != "":
		return "claim " + d.GetPvc().GetClaimName()
	case d.GetPvc() != nil:
		return fmt.Sprintf("new claim of %s, %s", d.GetPvc().GetStorageClass(), formatBytes(d.GetPvc().GetSizeBytes()))
	case d.GetGit() != nil:
		return strings.TrimSuffix(d.GetGit().GetRepository()+"@"+d.GetGit().GetRevision(), "@")
	case d.GetS3() != nil:
		return "s3://" + d.GetS3().GetBucket() + "/" + d.GetS3().GetPrefix()
	case d.GetConfigMap() != nil:
		return d.GetConfigMap().GetName()
	case d.GetSecret() != nil:
		return d.GetSecret().GetName()
	}
	return "-"
}

// oneOffFlags are submit's data source flags: names, and one-offs of
// KEY=VALUE fields separated by commas (a bare "readonly" is the flag).
type oneOffFlags struct {
	names, hostPaths, nfs, git, pvcs []string
}

func (o *oneOffFlags) add(fl *pflag.FlagSet) {
	fl.StringArrayVar(&o.names, "data-source", nil, "a data source to mount, by name (repeat)")
	fl.StringArrayVar(&o.hostPaths, "host-path", nil, "mount a node directory: path=DIR,mount=PATH[,readonly] (an account administrator's only; repeat)")
	fl.StringArrayVar(&o.nfs, "nfs", nil, "mount an NFS export: server=S,path=P,mount=PATH[,readonly] (repeat)")
	fl.StringArrayVar(&o.git, "git", nil, "clone a repository before the command starts: repository=URL,revision=R,mount=PATH[,credential=C][,readonly] (repeat)")
	fl.StringArrayVar(&o.pvcs, "existing-pvc", nil, "mount an existing claim (Kubernetes): claimname=C,mount=PATH[,readonly] (repeat)")
}

// mounts are the data sources the flags name or define.
func (o *oneOffFlags) mounts() ([]*workloadv1.DataSourceMount, error) {
	var out []*workloadv1.DataSourceMount
	for _, n := range o.names {
		out = append(out, &workloadv1.DataSourceMount{DataSource: n})
	}
	for _, g := range []struct {
		flag  string
		vals  []string
		keys  []string
		build func(kv map[string]string) *workloadv1.DataSource
	}{
		{"--host-path", o.hostPaths, []string{"path"}, func(kv map[string]string) *workloadv1.DataSource {
			return &workloadv1.DataSource{Source: &workloadv1.DataSource_HostPath{HostPath: &workloadv1.HostPathSource{Path: kv["path"]}}}
		}},
		{"--nfs", o.nfs, []string{"server", "path"}, func(kv map[string]string) *workloadv1.DataSource {
			return &workloadv1.DataSource{Source: &workloadv1.DataSource_Nfs{Nfs: &workloadv1.NfsSource{Server: kv["server"], Path: kv["path"]}}}
		}},
		{"--git", o.git, []string{"repository", "revision", "credential"}, func(kv map[string]string) *workloadv1.DataSource {
			return &workloadv1.DataSource{Source: &workloadv1.DataSource_Git{Git: &workloadv1.GitSource{
				Repository: kv["repository"], Revision: kv["revision"], Credential: kv["credential"]}}}
		}},
		{"--existing-pvc", o.pvcs, []string{"claimname"}, func(kv map[string]string) *workloadv1.DataSource {
			return &workloadv1.DataSource{Source: &workloadv1.DataSource_Pvc{Pvc: &workloadv1.PvcSource{ClaimName: kv["claimname"]}}}
		}},
	} {
		for _, v := range g.vals {
			kv, readOnly, err := oneOffFields(g.flag, v, append([]string{"mount"}, g.keys...))
			if err != nil {
				return nil, err
			}
			d := g.build(kv)
			d.MountPath, d.ReadOnly = kv["mount"], readOnly
			out = append(out, &workloadv1.DataSourceMount{Source: d})
		}
	}
	return out, nil
}

// oneOffFields parses KEY=VALUE,...[,readonly] with keys among known.
func oneOffFields(flag, v string, known []string) (map[string]string, bool, error) {
	kv := map[string]string{}
	readOnly := false
	for part := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(part, "=")
		switch {
		case !ok && (part == "readonly" || part == "ro"):
			readOnly = true
		case !ok || !slices.Contains(known, k):
			return nil, false, usageError("%s %q: %q is not one of %s=VALUE or readonly", flag, v, part, strings.Join(known, "=, "))
		default:
			kv[k] = val
		}
	}
	if kv["mount"] == "" {
		return nil, false, usageError("%s %q: mount=PATH is required", flag, v)
	}
	return kv, readOnly, nil
}
