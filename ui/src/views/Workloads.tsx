import { listAll } from '../api'
import { useLoad } from '../hooks'
import { Link } from '../router'
import { DataTable, type Col } from '../table'
import { gpus, id, labelText, phase, time, workloadType } from '../format'
import type { Project, Workload } from '../types'
import { useWorkloadWatch } from '../watch'

const PROJECTS_REFRESH_MS = 10_000

export function workloadCols(dept: Map<string, string>): Col<Workload>[] {
  return [
    { id: 'name', header: 'Name', text: (w) => id(w.name), cell: (w) => <Link to={`/workloads/${id(w.project)}/${id(w.name)}`}>{id(w.name)}</Link> },
    { id: 'type', header: 'Type', text: (w) => workloadType(w.type), filter: true },
    { id: 'status', header: 'Status', text: (w) => phase(w.status?.phase), filter: true, cell: (w) => <span className={`phase phase-${phase(w.status?.phase).toLowerCase()}`}>{phase(w.status?.phase)}</span> },
    { id: 'project', header: 'Project', text: (w) => id(w.project), filter: true },
    { id: 'department', header: 'Department', text: (w) => dept.get(w.project ?? '') ?? '', filter: true },
    { id: 'nodePool', header: 'Node pool', text: (w) => id(w.status?.nodePool) },
    { id: 'gpu', header: 'GPU allocation', text: (w) => gpus(w.status?.allocatedMilliGpus) },
    { id: 'pods', header: 'Running/requested pods', text: (w) => `${w.status?.runningPods ?? 0}/${w.status?.requestedPods ?? w.spec?.pods ?? 1}` },
    { id: 'submitted', header: 'Submitted', text: (w) => time(w.createTime) },
    { id: 'creator', header: 'Submitted by', text: (w) => id(w.creator) },
    { id: 'image', header: 'Image', text: (w) => w.spec?.image ?? '', hidden: true },
    { id: 'labels', header: 'Labels', text: (w) => labelText(w.labels) },
  ]
}

export function Workloads() {
  // The workloads are live from the watch stream; the projects (for their
  // departments) are re-read now and then.
  const { workloads, synced, error } = useWorkloadWatch()
  const { data: dept } = useLoad(
    async (signal) => new Map((await listAll<Project>('/v1/projects', 'projects', signal)).map((p) => [p.name, id(p.department)])),
    [],
    PROJECTS_REFRESH_MS,
  )
  return (
    <section aria-labelledby="h-workloads">
      <div className="heading">
        <h1 id="h-workloads">Workloads</h1>
        <Link to="/new" className="button">
          New workload
        </Link>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      {synced && <DataTable label="Workloads" rows={workloads} cols={workloadCols(dept ?? new Map())} rowKey={(w) => w.name} empty="No workloads you may see." />}
    </section>
  )
}
