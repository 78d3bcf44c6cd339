// The REST API's JSON shapes (gen/openapi/runway.swagger.json), the fields
// the views read. int64 fields arrive as strings.

export interface Quantity { milliGpus?: string; milliCpu?: string; memoryBytes?: string }
export interface GpuRequest { devices?: number; fractionMilli?: number; gpuMemoryBytes?: string }
export interface WorkloadSpec {
  image?: string; command?: string[]; args?: string[]; env?: { name: string; value: string }[]
  gpu?: GpuRequest; milliCpu?: string; memoryBytes?: string; pods?: number; minPods?: number
  priority?: string; nodePools?: string[]; nodeType?: string; suspended?: boolean; ttlAfterFinishedSeconds?: string
  imagePullPolicy?: string; registryCredential?: string; credentials?: { credential: string; path?: string }[]
  dataSources?: { dataSource?: string; source?: { mountPath?: string; readOnly?: boolean } & Record<string, unknown> }[]
}
export interface PendingReason {
  check?: string; message?: string; nodePool?: string; queue?: string
  requested?: Quantity; available?: Quantity; nodeCount?: number
}
export interface PodStatus {
  index?: number; node?: string; deviceIndexes?: number[]; fractionMilli?: number
  state?: string; exitCode?: number; message?: string
}
export interface WorkloadEvent { type?: string; time?: string; message?: string; by?: string; rule?: string; pods?: number; nodes?: string[] }
export interface Workload {
  name: string; project?: string; type?: string; spec?: WorkloadSpec; createTime?: string; creator?: string; etag?: string
  labels?: Record<string, string>
  status?: {
    phase?: string; runningPods?: number; requestedPods?: number; allocatedMilliGpus?: string; nodePool?: string
    nodes?: string[]; pods?: PodStatus[]; pendingReasons?: PendingReason[]; preemptionCount?: number; events?: WorkloadEvent[]
    stopReason?: string; gpuIdleTime?: string
    tools?: { name?: string; type?: string; url?: string }[]; endpointUrl?: string
  }
}
export interface GpuQuota { deservedMilliGpus?: string; limitMilliGpus?: string; overQuotaWeight?: number; overQuotaEnabled?: boolean }
export interface NodePoolQuota { nodePool?: string; gpu?: GpuQuota }
export interface SchedulingRules { workloadType?: string; timeLimit?: string; idleGpuLimit?: string; preemptWhenIdle?: boolean; nodeTypes?: string[] }
export interface Project { name: string; department?: string; description?: string; nodePoolQuotas?: NodePoolQuota[]; etag?: string; schedulingRules?: SchedulingRules[] }
export interface Department { name: string; description?: string; nodePoolQuotas?: NodePoolQuota[]; etag?: string; schedulingRules?: SchedulingRules[] }
export interface QueueNodePool {
  nodePool?: string; deserved?: Quantity; limit?: Quantity; fairShare?: Quantity; allocated?: Quantity; requested?: Quantity
  runningWorkloads?: number; pendingWorkloads?: number; overQuotaWeights?: { gpu?: number }
}
export interface Queue { name: string; kind?: string; parentQueue?: string; nodePools?: QueueNodePool[] }
export interface DeviceAllocation { workload?: string; podIndex?: number; fractionMilli?: number }
export interface TimeSlot { workload?: string; podIndex?: number; sharePercent?: number }
export interface GpuDevice {
  index?: number; model?: string; memoryBytes?: string; healthy?: boolean; allocations?: DeviceAllocation[]
  timeSlicePlan?: { mode?: string; leaseDuration?: string; slots?: TimeSlot[] }
}
export interface NodeT {
  name: string; nodePool?: string; readiness?: string; drained?: boolean; drainReason?: string
  capacity?: Quantity; allocated?: Quantity; devices?: GpuDevice[]; roles?: string[]; labels?: Record<string, string>; etag?: string
}
export interface NodePool { name: string; placementStrategy?: string; timeSlicing?: { mode?: string }; description?: string; nodeSelector?: Record<string, string>; etag?: string }
export interface User { name: string; email?: string; displayName?: string; groups?: string[]; temporaryPassword?: string; passwordChangeRequired?: boolean; lastLoginTime?: string; etag?: string }
export interface Application { name: string; clientId?: string; clientSecret?: string; createTime?: string; lastLoginTime?: string; etag?: string }
export interface AccessRule { name: string; subject?: { kind?: string; name?: string }; role?: string; scope?: { kind?: string; name?: string }; creator?: string; etag?: string }
export interface Role { name: string; displayName?: string; description?: string; permissions?: string[] }
export interface AuditEvent { name: string; createTime?: string; principal?: string; method?: string; resource?: string; statusCode?: number; errorReason?: string; peerAddress?: string; requestId?: string }
export interface FieldRule { required?: boolean; min?: number; max?: number; step?: number; options?: string[]; canEdit?: boolean }
export interface EffectiveField { field: string; defaultValue?: string; defaultSource?: string; rule?: FieldRule; ruleSource?: string }
export interface EffectivePolicy { project?: string; type?: string; fields?: EffectiveField[] }
export interface Policy { name: string; defaults?: WorkloadSpec; rules?: Record<string, FieldRule>; updateTime?: string; etag?: string }
export interface Environment { name: string; description?: string; image?: string; command?: string[]; args?: string[]; imagePullPolicy?: string; registryCredential?: string }
export interface ComputeResource { name: string; description?: string; gpu?: GpuRequest; milliCpu?: string; memoryBytes?: string }
export interface Template {
  name: string; description?: string; type?: string; environment?: string; computeResource?: string
  spec?: { image?: string; command?: string[]; args?: string[]; gpu?: GpuRequest; pods?: number }
}
export interface Caller { principal: string; groups?: string[]; accessRules?: AccessRule[]; expireTime?: string }
export interface FilterCount { check?: string; nodes?: number; message?: string }
export interface NodePoolAttempt { nodePool?: string; nodesTotal?: number; nodesFeasible?: number; filtered?: FilterCount[]; largestFreeBlock?: Quantity; reasons?: PendingReason[] }
export interface Explain {
  name?: string; phase?: string; pendingReasons?: PendingReason[]; nodePoolAttempts?: NodePoolAttempt[]
  lastDecision?: { time?: string; outcome?: string; rule?: string; nodePool?: string; workloads?: string[]; message?: string }
}
