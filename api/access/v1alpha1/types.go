package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the access API's group.
	GroupName = "access.sandbox.afe.dev"
	// Version is the access API's version.
	Version = "v1alpha1"
)

// SchemeGroupVersion is the access API's group and version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// The resources and subresources the access API serves, under
// /apis/access.sandbox.afe.dev/v1alpha1/namespaces/NS/RESOURCE/NAME/SUBRESOURCE.
const (
	// ResourceSandboxes is the resource of exec, files and a sandbox's
	// telemetry.
	ResourceSandboxes = "sandboxes"
	// ResourceRuns is the resource of a Run's log.
	ResourceRuns = "runs"
	// ResourceTickets is the resource of a ticket's telemetry.
	ResourceTickets = "tickets"

	// SubresourceExec (POST) runs a command over the Kubernetes streaming
	// protocol; its query is that of PodExecOptions (command, stdin,
	// stdout, stderr, tty).
	SubresourceExec = "exec"
	// SubresourceFiles: GET ?path=P answers with a tar of P; POST ?path=D
	// with a tar body extracts it into the folder D.
	SubresourceFiles = "files"
	// SubresourceLog (GET, ?follow=true, ?attempt=N) is a Run's log.
	SubresourceLog = "log"
	// SubresourceTelemetry (GET, ?limit=N) is a CommandRecordList.
	SubresourceTelemetry = "telemetry"
)

// Query parameters of the access API.
const (
	// ParamPath is the workspace path of a file transfer.
	ParamPath = "path"
	// ParamFollow asks a Run's log to be followed until its attempt ends.
	ParamFollow = "follow"
	// ParamAttempt names the attempt of a Run's log (default: the latest).
	ParamAttempt = "attempt"
	// ParamLimit bounds the number of telemetry records (the newest).
	ParamLimit = "limit"
)

// AttemptHeader is the response header of a Run's log that names the
// attempt whose log the body is (the latest one when none was asked for).
const AttemptHeader = "X-Afe-Attempt"

// CommandRecordListKind is the kind of a CommandRecordList.
const CommandRecordListKind = "CommandRecordList"

// CommandRecord is one command executed in a sandbox. Its identity
// (namespace, sandbox, UID, ticket) comes from the controller, never from
// anything the workload wrote.
type CommandRecord struct {
	Namespace  string `json:"namespace"`
	Sandbox    string `json:"sandbox"`
	SandboxUID string `json:"sandboxUID"`
	Ticket     string `json:"ticket,omitempty"`
	// Seq is the sandbox's sequence number, given by the store: 1, 2, ...
	Seq     int64     `json:"seq"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Command []string  `json:"command"`
	// User is the uid:gid the command ran as.
	User     string `json:"user,omitempty"`
	ExitCode int    `json:"exitCode"`
	Run      string `json:"run,omitempty"`
	Attempt  int32  `json:"attempt,omitempty"`
	// OutputBytes and OutputSHA256 are of the whole output (stdout and
	// stderr as they interleaved), where the controller saw it.
	OutputBytes  int64  `json:"outputBytes"`
	OutputSHA256 string `json:"outputSHA256,omitempty"`
	// Source is how the command came: Run, Builtin, API or Engine (an exec
	// made straight on the engine, seen in its event stream).
	Source string `json:"source"`
	// StartedBy is who started it: the Run, the API's caller, or the
	// engine.
	StartedBy string `json:"startedBy,omitempty"`
}

// CommandRecordList is a list of records, in order, as the access API
// answers sandboxes/NAME/telemetry and tickets/NAME/telemetry.
type CommandRecordList struct {
	Kind       string          `json:"kind"`
	APIVersion string          `json:"apiVersion"`
	Items      []CommandRecord `json:"items"`
	// Unanswered names, in per-node mode, the nodes whose manager did not
	// answer: their records, if they keep any of this sandbox or ticket,
	// are missing from Items.
	Unanswered []UnansweredNode `json:"unanswered,omitempty"`
	// Pruned says, per sandbox, how many of its records of this kind the
	// telemetry's size bounds removed: they are missing from Items.
	Pruned []PrunedRecords `json:"pruned,omitempty"`
}

// PrunedRecords is how many records of one kind (commands, or egress
// decisions) of a sandbox the telemetry's size bounds removed, the oldest
// first: its namespace held more of them than its share of the store
// (--telemetry-namespace-max-records, --telemetry-max-bytes). Records the
// retention removed are not counted.
type PrunedRecords struct {
	Sandbox    string `json:"sandbox"`
	SandboxUID string `json:"sandboxUID"`
	// Records is how many were removed; ThroughSeq is the sequence number
	// of the newest of them: every record of the kind up to it is gone.
	Records    int64 `json:"records"`
	ThroughSeq int64 `json:"throughSeq"`
	// Last is when records of it were last removed.
	Last time.Time `json:"last"`
}

// UnansweredNode is a node whose records are missing from an answer, and
// why.
type UnansweredNode struct {
	Node    string `json:"node"`
	Message string `json:"message"`
}

// EgressRecordListKind is the kind of an EgressRecordList.
const EgressRecordListKind = "EgressRecordList"

// ParamEgress asks the telemetry subresource for the egress records
// (an EgressRecordList) rather than the commands.
const ParamEgress = "egress"

// ParamDenied keeps only the denied egress records.
const ParamDenied = "denied"

// EgressRecord is one decision of a sandbox's egress proxy on one request.
// Its identity (namespace, sandbox, UID, ticket) comes from the controller's
// verified view of the proxy container (its labels), never from the log
// line. Method and Host are the workload's words: bounded and escaped
// (printable ASCII, anything else as %XX; a host over 253 bytes cut and
// marked "...(truncated)").
type EgressRecord struct {
	Namespace  string `json:"namespace"`
	Sandbox    string `json:"sandbox"`
	SandboxUID string `json:"sandboxUID"`
	Ticket     string `json:"ticket,omitempty"`
	// Seq is the sandbox's sequence number, shared with its commands.
	Seq int64 `json:"seq"`
	// Time is when the proxy logged the request (its end); Duration how
	// long the proxy took over it.
	Time     time.Time       `json:"time"`
	Duration metav1.Duration `json:"duration"`
	Method   string          `json:"method"`
	Host     string          `json:"host"`
	Port     int             `json:"port,omitempty"`
	// Decision is Allowed or Denied; Reason says why a request was
	// denied: port, host, address, private, nothing, refused, or empty
	// (Connections that carried no request).
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Status is the proxy's: its result code and the HTTP status.
	Status string `json:"status,omitempty"`
	// BytesUp came from the sandbox, BytesDown went to it.
	BytesUp   int64 `json:"bytesUp"`
	BytesDown int64 `json:"bytesDown"`
	// Running names what the controller was executing in the sandbox
	// during the request, each as "Run/NAME" or "exec/USER@HH:MM:SS.mmm"
	// (an exec through the access API, by its caller and start, UTC): one
	// entry when exactly one was, every one otherwise, none when nothing
	// the controller executed was (a process the workload left running, or
	// an exec made straight on the engine).
	Running []string `json:"running,omitempty"`
	// Proxy is the ID of the proxy container that logged it.
	Proxy string `json:"proxy"`
	// Connections, when above 0, makes this record stand for that many
	// connections to the proxy that carried no request (closed before
	// sending one, squid's error:transaction-end-before-headers; Reason
	// empty): the first ended at Time, the last Duration after it. They
	// are recorded in aggregate, not one record each: at most one record
	// per proxy and 10 seconds, closed early by the next request.
	Connections int64 `json:"connections,omitempty"`
}

// The decisions of an EgressRecord.
const (
	EgressAllowed = "Allowed"
	EgressDenied  = "Denied"
)

// EgressRecordList is a list of egress records, in order, as the access
// API answers the telemetry subresources with ?egress=true.
type EgressRecordList struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Items      []EgressRecord `json:"items"`
	// Unanswered and Pruned: as a CommandRecordList's.
	Unanswered []UnansweredNode `json:"unanswered,omitempty"`
	Pruned     []PrunedRecords  `json:"pruned,omitempty"`
}

// Reason is why the access API refused a request, in words a client acts
// on. It travels as the Type of the one cause in the Status's Details.
type Reason string

// The reasons of the access API.
const (
	// ReasonSandboxNotFound: no Sandbox of that name in the namespace.
	ReasonSandboxNotFound Reason = "SandboxNotFound"
	// ReasonRunNotFound: no Run of that name in the namespace.
	ReasonRunNotFound Reason = "RunNotFound"
	// ReasonSandboxNotReady: the sandbox has no running container of its
	// own yet (or any more): wait until it is Ready and ask again.
	ReasonSandboxNotReady Reason = "SandboxNotReady"
	// ReasonSandboxDeleting: the Sandbox is being deleted.
	ReasonSandboxDeleting Reason = "SandboxDeleting"
	// ReasonEnvUnavailable: the sandbox's declared env cannot be given to
	// the command now (a Secret deleted since): nothing was executed.
	ReasonEnvUnavailable Reason = "EnvUnavailable"
	// ReasonLogNotFound: the Run's attempt has no log, or none yet; the
	// attempt may still write one while the Run has not ended.
	ReasonLogNotFound Reason = "LogNotFound"
	// ReasonLogsNotKept: this manager keeps no Run logs: read the Run's
	// status.output instead.
	ReasonLogsNotKept Reason = "LogsNotKept"
	// ReasonTelemetryNotKept: this manager keeps no command telemetry.
	ReasonTelemetryNotKept Reason = "TelemetryNotKept"
	// ReasonUsageNotMeasured: the sandbox has no usage measured (its
	// container is not running, or started since the last measurement:
	// ask again within the manager's --usage-period), or the manager
	// measures none (--usage-period negative).
	ReasonUsageNotMeasured Reason = "UsageNotMeasured"
	// ReasonPathNotFound: the workspace path of a transfer does not exist.
	ReasonPathNotFound Reason = "PathNotFound"
	// ReasonPathRefused: the workspace path of a transfer is outside
	// /workspace, crosses a symlink, or is not the folder it must be.
	ReasonPathRefused Reason = "PathRefused"
	// ReasonTarRefused: the tar of an upload does not read, or holds an
	// entry uploads refuse (a device, a hard link, a sparse file, a name
	// leaving the destination).
	ReasonTarRefused Reason = "TarRefused"
	// ReasonTransferTooLarge: the transfer is past the manager's bound.
	ReasonTransferTooLarge Reason = "TransferTooLarge"
	// ReasonInvalidRequest: the request's options are wrong.
	ReasonInvalidRequest Reason = "InvalidRequest"
	// ReasonForbidden: the caller may not do this (RBAC).
	ReasonForbidden Reason = "Forbidden"
	// ReasonNodeUnavailable: in per-node mode, the manager of the node the
	// sandbox is placed on is not running or does not answer; the message
	// names the node.
	ReasonNodeUnavailable Reason = "NodeUnavailable"
)

// Details are the Status details of a refusal for reason, about the
// object resource/name.
func Details(reason Reason, resource, name string) *metav1.StatusDetails {
	return &metav1.StatusDetails{
		Group:  GroupName,
		Kind:   resource,
		Name:   name,
		Causes: []metav1.StatusCause{{Type: metav1.CauseType(reason)}},
	}
}

// ReasonOf is the access API's reason of a Status, empty when it carries
// none (a refusal of the Kubernetes API server itself, or of another API,
// or a Status client-go made of an answer that was none, such as the API
// server's 503 while no manager serves the access API: its cause is
// UnexpectedServerResponse, with the group and resource of the request).
func ReasonOf(st *metav1.Status) Reason {
	if st == nil || st.Details == nil || st.Details.Group != GroupName || len(st.Details.Causes) == 0 {
		return ""
	}
	if st.Details.Causes[0].Type == metav1.CauseTypeUnexpectedServerResponse {
		return ""
	}
	return Reason(st.Details.Causes[0].Type)
}
