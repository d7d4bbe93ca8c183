package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// operation is what a tool needs of an OpenAPI operation, read from the
// document's JSON.
type operation struct {
	Method, Path string
	Summary      string
	Description  string
	Scopes       []string
	Params       []param
	// BodyFields are the request body's properties when they are the
	// tool's own arguments; Body is set when the body is one argument,
	// "body", instead (a free JSON object: a payload).
	BodyFields []string
	Body       bool
	Input      map[string]any // the tool's input schema
	Output     map[string]any // the tool's output schema; nil when the answer is not one object
}

// param is a path, query or header parameter, and the argument that
// carries it.
type param struct {
	Name, In, Arg string
}

// document is an OpenAPI document as JSON values.
type document struct {
	paths   map[string]any
	schemas map[string]any
}

func parseDocument(raw []byte) (document, error) {
	var doc struct {
		Paths      map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return document{}, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	return document{paths: doc.Paths, schemas: doc.Components.Schemas}, nil
}

// find is the operation with id.
func (d document) find(id string) (operation, error) {
	for path, item := range d.paths {
		for method, v := range item.(map[string]any) {
			op, ok := v.(map[string]any)
			if !ok || op["operationId"] != id {
				continue
			}
			return d.operation(strings.ToUpper(method), path, op), nil
		}
	}
	return operation{}, fmt.Errorf("the API has no operation %q", id)
}

func (d document) operation(method, path string, op map[string]any) operation {
	out := operation{Method: method, Path: path}
	out.Summary, _ = op["summary"].(string)
	out.Description, _ = op["description"].(string)
	if sec, ok := op["security"].([]any); ok {
		for _, req := range sec {
			for _, scopes := range req.(map[string]any) {
				for _, s := range scopes.([]any) {
					out.Scopes = append(out.Scopes, s.(string))
				}
			}
		}
	}
	props, required := map[string]any{}, []string{}
	params, _ := op["parameters"].([]any)
	for _, v := range params {
		p := v.(map[string]any)
		name, _ := p["name"].(string)
		in, _ := p["in"].(string)
		arg := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
		schema := copyMap(p["schema"])
		if desc, ok := p["description"].(string); ok && schema["description"] == nil {
			schema["description"] = desc
		}
		props[arg] = schema
		if req, _ := p["required"].(bool); req {
			required = append(required, arg)
		}
		out.Params = append(out.Params, param{Name: name, In: in, Arg: arg})
	}
	if body := d.bodySchema(op["requestBody"]); body != nil {
		resolved := d.resolve(body)
		fields, _ := resolved["properties"].(map[string]any)
		if len(fields) > 0 && !collides(fields, props) {
			for name, schema := range fields {
				props[name] = schema
				out.BodyFields = append(out.BodyFields, name)
			}
			if req, ok := resolved["required"].([]any); ok {
				for _, r := range req {
					required = append(required, r.(string))
				}
			}
		} else {
			if rb, ok := op["requestBody"].(map[string]any); ok && body["description"] == nil {
				if desc, ok := rb["description"].(string); ok {
					body = copyMap(body)
					body["description"] = desc
				}
			}
			props["body"], out.Body = body, true
		}
	}
	out.Input = d.withDefs(map[string]any{"type": "object", "properties": props, "required": required})
	if resp := d.answerSchema(op["responses"]); resp != nil {
		if resolved := d.resolve(resp); resolved["type"] == "object" {
			out.Output = d.withDefs(resolved)
		}
	}
	return out
}

// bodySchema is the JSON schema of a request body or response (nil: none).
func (d document) bodySchema(v any) map[string]any {
	m, _ := v.(map[string]any)
	content, _ := m["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	schema, _ := media["schema"].(map[string]any)
	return schema
}

// answerSchema is the schema of the operation's success answer: 200's,
// else the first other 2xx's.
func (d document) answerSchema(v any) map[string]any {
	responses, _ := v.(map[string]any)
	if s := d.bodySchema(responses["200"]); s != nil {
		return s
	}
	for _, code := range []int{http.StatusCreated, http.StatusAccepted} {
		if s := d.bodySchema(responses[fmt.Sprint(code)]); s != nil {
			return s
		}
	}
	return nil
}

const componentRef = "#/components/schemas/"

// resolve follows schema's $ref, if it has one.
func (d document) resolve(schema map[string]any) map[string]any {
	ref, ok := schema["$ref"].(string)
	if !ok {
		return schema
	}
	target, _ := d.schemas[strings.TrimPrefix(ref, componentRef)].(map[string]any)
	if target == nil {
		return schema
	}
	return target
}

var refPattern = regexp.MustCompile(`"#/components/schemas/([^"]+)"`)

// withDefs is schema made self-contained: every component it refers to,
// at any depth, copied under $defs, and the references pointed there.
func (d document) withDefs(schema map[string]any) map[string]any {
	defs := map[string]any{}
	pending := []map[string]any{schema}
	for len(pending) > 0 {
		raw, _ := json.Marshal(pending[0])
		pending = pending[1:]
		for _, m := range refPattern.FindAllStringSubmatch(string(raw), -1) {
			if _, seen := defs[m[1]]; seen {
				continue
			}
			target, _ := d.schemas[m[1]].(map[string]any)
			defs[m[1]] = target
			if target != nil {
				pending = append(pending, target)
			}
		}
	}
	out := copyMap(schema)
	if len(defs) > 0 {
		out["$defs"] = defs
	}
	raw, _ := json.Marshal(out)
	raw = []byte(strings.ReplaceAll(string(raw), `"`+componentRef, `"#/$defs/`))
	var rewritten map[string]any
	_ = json.Unmarshal(raw, &rewritten)
	return rewritten
}

func collides(a, b map[string]any) bool {
	for k := range a {
		if _, ok := b[k]; ok {
			return true
		}
	}
	return false
}

func copyMap(v any) map[string]any {
	out := map[string]any{}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			out[k] = x
		}
	}
	return out
}
