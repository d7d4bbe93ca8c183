// trigger.js: enqueue a plugin command with a JSON payload; the payload is
// checked as JSON (an object) before anything is sent.
import { h, toast } from "./dom.js";
import { get, post, errorText } from "./api.js";
import { go } from "./app.js";

export async function render(main, _params, query) {
  const [{ plugins = [] }, { pipelines = [] }] = await Promise.all([get("/plugins"),
    get("/pipelines").catch(() => ({}))]); // a token without plugin:ro reads neither; the name is typed then
  const enabled = plugins.filter((p) => p.enabled);
  const plugin = h("select", { id: "t-plugin", name: "plugin" }, enabled.map((p) => h("option", { value: p.name }, p.name)));
  const command = h("select", { id: "t-command", name: "command" });
  const fill = () => {
    const p = enabled.find((x) => x.name === plugin.value);
    command.replaceChildren(...((p && p.commands) || []).map((c) => h("option", { value: c.name }, `${c.name} (${c.type})`)));
  };
  plugin.addEventListener("change", fill);
  fill();
  const payload = h("textarea", { id: "t-payload", name: "payload", rows: 8, spellcheck: "false", class: "mono", "aria-describedby": "t-check" }, "{}");
  const check = h("p", { id: "t-check", role: "alert", class: "muted" });
  const send = h("button", { class: "primary", type: "submit", id: "t-send" }, "Enqueue");
  const validate = () => {
    const text = payload.value.trim();
    if (text === "") { check.textContent = "No payload."; send.disabled = false; return ""; }
    try {
      const v = JSON.parse(text);
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("the payload must be a JSON object ({…})");
      check.textContent = "Valid JSON.";
      payload.removeAttribute("aria-invalid");
      send.disabled = false;
      return text;
    } catch (err) {
      check.textContent = `Not valid: ${err.message}`;
      payload.setAttribute("aria-invalid", "true");
      send.disabled = true;
      return null;
    }
  };
  payload.addEventListener("input", validate);
  validate();
  // What to run: a plugin's command, or a pipeline by name.
  const wanted = query.get("pipeline");
  const kindPlugin = h("input", { type: "radio", name: "kind", id: "t-kind-plugin", value: "plugin", checked: !wanted });
  const kindPipeline = h("input", { type: "radio", name: "kind", id: "t-kind-pipeline", value: "pipeline", checked: !!wanted });
  const pipeline = h("input", { type: "text", id: "t-pipeline", name: "pipeline", placeholder: "pipeline name", autocomplete: "off",
    list: "t-pipelines", value: wanted || "" });
  const names = h("datalist", { id: "t-pipelines" }, pipelines.map((p) => h("option", { value: p.name }, `${p.name} (${p.trigger})`)));
  const pluginFields = h("div", { class: "stack" }, h("label", {}, "Plugin", plugin), h("label", {}, "Command", command));
  const pipelineFields = h("div", { class: "stack", hidden: true }, h("label", {}, "Pipeline", pipeline), names);
  const pick = () => { pluginFields.hidden = kindPipeline.checked; pipelineFields.hidden = !kindPipeline.checked; };
  kindPlugin.addEventListener("change", pick);
  kindPipeline.addEventListener("change", pick);
  pick();
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    const body = validate();
    if (body === null) return;
    try {
      if (kindPipeline.checked) {
        const res = await post(`/pipeline/${encodeURIComponent(pipeline.value.trim())}`, body || "{}");
        toast(`Started pipeline run ${res.run_id}`);
        go(`/ui/job/${res.job_id}/tree`);
        return;
      }
      const res = await post(`/plugin/${encodeURIComponent(plugin.value)}/${encodeURIComponent(command.value)}`, body || undefined);
      toast(`Enqueued job ${res.job_id}`);
      go(`/ui/job/${res.job_id}`);
    } catch (err) { toast(errorText(err), true); }
  } },
    h("fieldset", {}, h("legend", {}, "Run"),
      h("label", { class: "inline" }, kindPlugin, " a plugin command"), h("label", { class: "inline" }, kindPipeline, " a pipeline")),
    pluginFields, pipelineFields,
    h("label", {}, "Payload (JSON object)", payload), check, h("div", {}, send));
  main.append(h("h1", {}, "Trigger"), form);
}
