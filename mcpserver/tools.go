// Package mcpserver offers the daemon's HTTP API to agents as an MCP
// server (Model Context Protocol, github.com/modelcontextprotocol/go-sdk):
// each tool is one API operation, its input and output schemas taken from
// the OpenAPI document the API generates from its Go types, and each call
// is a request to that operation, so the API's scopes, validation, errors
// and logic hold unchanged. api mounts it at /mcp (streamable HTTP);
// ductile mcp serves it over stdio, calling a daemon's API.
package mcpserver

// tool is an API operation offered as an MCP tool.
type tool struct {
	Name      string // the tool's name
	Operation string // the OpenAPI operationId it calls
	// ReadOnly marks a tool that changes nothing (an MCP annotation).
	ReadOnly bool
}

// tools are the operations offered, in the order tools/list shows them.
var tools = []tool{
	{Name: "list_plugins", Operation: "list-plugins", ReadOnly: true},
	{Name: "list_plugin_commands", Operation: "list-plugin-commands", ReadOnly: true},
	{Name: "get_plugin", Operation: "get-plugin", ReadOnly: true},
	{Name: "run_command", Operation: "create-run"},
	{Name: "run_pipeline", Operation: "run-pipeline"},
	{Name: "list_pipelines", Operation: "list-pipelines", ReadOnly: true},
	{Name: "get_pipeline", Operation: "get-pipeline", ReadOnly: true},
	{Name: "list_schedules", Operation: "list-schedules", ReadOnly: true},
	{Name: "list_runs", Operation: "list-runs", ReadOnly: true},
	{Name: "get_run", Operation: "get-run", ReadOnly: true},
	{Name: "wait_run", Operation: "wait-run", ReadOnly: true},
	{Name: "cancel_run", Operation: "cancel-run"},
	{Name: "retry_run", Operation: "retry-run"},
	{Name: "list_jobs", Operation: "list-jobs", ReadOnly: true},
	{Name: "get_job", Operation: "get-job", ReadOnly: true},
	{Name: "get_job_tree", Operation: "get-job-tree", ReadOnly: true},
	{Name: "get_job_logs", Operation: "get-job-logs", ReadOnly: true},
	{Name: "get_job_events", Operation: "get-job-events", ReadOnly: true},
	{Name: "cancel_job", Operation: "cancel-job"},
	{Name: "retry_job", Operation: "retry-job"},
	{Name: "read_ledger", Operation: "read-ledger", ReadOnly: true},
	{Name: "verify_ledger", Operation: "verify-ledger", ReadOnly: true},
	{Name: "list_workers", Operation: "list-workers", ReadOnly: true},
	{Name: "publish_message", Operation: "publish-message"},
	{Name: "read_messages", Operation: "list-messages", ReadOnly: true},
	{Name: "check_conversation", Operation: "check-conversation", ReadOnly: true},
	{Name: "inspect_message", Operation: "inspect-message", ReadOnly: true},
	{Name: "inspect_conversation", Operation: "inspect-conversation", ReadOnly: true},
	{Name: "health", Operation: "health", ReadOnly: true},
}
