package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ductile/ductile/docs"
)

// resource is a document the server offers.
type resource struct {
	URI, Name, Description, Text string
}

var resources = []resource{
	{URI: "ductile://docs/events.md", Name: "events", Description: "The event catalogue: every event type the ledger records, its stream and data", Text: docs.Events},
	{URI: "ductile://docs/config-reference.md", Name: "config-reference", Description: "The config reference: every key of ductile.yaml, its default and meaning", Text: docs.ConfigReference},
}

// addResources adds the documents, embedded in the binary.
func addResources(srv *mcp.Server) {
	for _, r := range resources {
		srv.AddResource(&mcp.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: "text/markdown"},
			func(_ context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.URI, MIMEType: "text/markdown", Text: r.Text}}}, nil
			})
	}
}
