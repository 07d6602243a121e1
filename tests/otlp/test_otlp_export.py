"""OpenTelemetry traces sent as users send them, with the official Python SDK and its
OTLP/HTTP exporters (protobuf and JSON), to a real `treeline serve`, then read back
through Treeline's query API."""

import datetime
import json
import uuid

import pytest
from opentelemetry.exporter.otlp.common.http import Compression as JsonCompression
from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as ProtobufCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as ProtobufSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

ENCODINGS = ["protobuf", "json"]


def make_exporter(encoding, server, gzip=False):
    endpoint = server.url + "/v1/traces"
    if encoding == "protobuf":
        compression = ProtobufCompression.Gzip if gzip else ProtobufCompression.NoCompression
        return ProtobufSpanExporter(endpoint=endpoint, compression=compression)
    compression = JsonCompression.GZIP if gzip else JsonCompression.NONE
    return JsonSpanExporter(endpoint=endpoint, compression=compression)


class Recording(SpanExporter):
    """Passes batches on and keeps each export's result, so a failed export fails
    the test instead of vanishing inside the batch processor."""

    def __init__(self, inner):
        self.inner = inner
        self.results = []

    def export(self, spans):
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True


def send(server, encoding, resource, build, gzip=False):
    """Runs `build(tracer)` under a provider exporting to the server the way an app
    does (a batch processor), and returns the finished spans by name."""
    provider = TracerProvider(resource=Resource.create(resource))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter = Recording(make_exporter(encoding, server, gzip))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    build(provider.get_tracer("treeline-otlp-tests"))
    assert provider.force_flush(20_000)
    provider.shutdown()
    assert exporter.results and all(r == SpanExportResult.SUCCESS for r in exporter.results)
    return {span.name: span for span in memory.get_finished_spans()}


def hex_ids(span):
    ctx = span.get_span_context()
    parent = format(span.parent.span_id, "016x") if span.parent else None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"), parent


def read_tree(server, run_id, trace_id):
    """Every span of a trace through the query API, by span id."""
    base = "/api/runs/%s/traces/%s/spans" % (run_id, trace_id)
    found = {}
    queue = [s["span_id"] for s in server.get(base)["spans"]]
    while queue:
        span_id = queue.pop()
        found[span_id] = server.get("%s/%s" % (base, span_id))
        children = server.get("%s?parent_span_id=%s" % (base, span_id))["spans"]
        queue.extend(c["span_id"] for c in children)
    return found


def openinference_agent(tracer):
    with tracer.start_as_current_span("agent", attributes={
        "openinference.span.kind": "AGENT",
        "input.value": "What is the weather in Paris?",
        "treeline.step": 3,
    }) as root:
        with tracer.start_as_current_span("ChatCompletion", attributes={
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-test",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "You are a helpful agent.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "What is the weather in Paris?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                '{"city": "Paris"}',
            "llm.token_count.prompt": 20,
            "llm.token_count.completion": 10,
            "llm.token_count.total": 30,
        }):
            pass
        try:
            with tracer.start_as_current_span("get_weather", attributes={
                "openinference.span.kind": "TOOL",
                "input.value": '{"city": "Paris"}',
                "input.mime_type": "application/json",
            }):
                raise TimeoutError("weather service timed out")
        except TimeoutError:
            pass
        root.set_attribute("output.value", "I could not reach the weather service.")


def gen_ai_agent(tracer):
    with tracer.start_as_current_span("invoke_agent planner", attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "planner",
    }):
        with tracer.start_as_current_span("chat gpt-test", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-test",
            "gen_ai.input.messages": json.dumps([
                {"role": "user", "parts": [{"type": "text", "content": "Book a table for two"}]},
            ]),
            "gen_ai.output.messages": json.dumps([
                {"role": "assistant", "finish_reason": "tool_call", "parts": [
                    {"type": "tool_call", "id": "call_9", "name": "book_table",
                     "arguments": {"people": 2}}]},
            ]),
            "gen_ai.usage.input_tokens": 11,
            "gen_ai.usage.output_tokens": 7,
        }):
            pass
        with tracer.start_as_current_span("execute_tool book_table", attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "book_table",
            "step": 4,
        }) as tool:
            tool.set_status(Status(StatusCode.ERROR, "no tables left"))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_an_openinference_agent_trace_reads_back(server, encoding):
    run_id = "oi-%s-%s" % (encoding, uuid.uuid4().hex[:8])
    spans = send(server, encoding, {
        "service.name": "weather-agent",
        "openinference.project.name": "oi-agents",
        "treeline.run_id": run_id,
    }, openinference_agent)
    trace_id, root_id, _ = hex_ids(spans["agent"])
    _, llm_id, llm_parent = hex_ids(spans["ChatCompletion"])
    _, tool_id, tool_parent = hex_ids(spans["get_weather"])

    run = server.get("/api/runs/%s" % run_id)
    assert run["project"] == "oi-agents"
    trace = server.get("/api/runs/%s/traces/%s" % (run_id, trace_id))
    assert trace["span_count"] == 3
    assert trace["kind"] == "agent"
    assert trace["status"] == "ok"
    assert trace["error_count"] == 1
    assert trace["token_count"] == 30
    assert trace["step"] == 3

    tree = read_tree(server, run_id, trace_id)
    assert set(tree) == {root_id, llm_id, tool_id}
    root, llm, tool = tree[root_id], tree[llm_id], tree[tool_id]
    assert root["parent_span_id"] is None
    assert (llm["parent_span_id"], tool["parent_span_id"]) == (root_id, root_id)
    assert (llm_parent, tool_parent) == (root_id, root_id)
    assert (root["kind"], llm["kind"], tool["kind"]) == ("agent", "model", "tool")
    assert root["input"] == "What is the weather in Paris?"
    assert root["output"] == "I could not reach the weather service."
    assert root["start_us"] == spans["agent"].start_time // 1000
    assert root["end_us"] == spans["agent"].end_time // 1000

    assert llm["input"] == [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ]
    assert llm["output"] == [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}]
    assert llm["token_count"] == 30
    assert llm["attributes"]["llm.model_name"] == "gpt-test"
    assert llm["step"] == 3

    assert tool["status"] == "error"
    assert tool["error"]["type"] == "TimeoutError"
    assert tool["error"]["message"] == "weather service timed out"
    assert tool["input"] == {"city": "Paris"}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_gen_ai_trace_lands_in_the_projects_run_of_the_day(server, encoding):
    project = "genai-%s-%s" % (encoding, uuid.uuid4().hex[:8])
    # Only a service name: no run is named, so the project's run of the day is used.
    spans = send(server, encoding, {"service.name": project}, gen_ai_agent, gzip=True)
    root_span = spans["invoke_agent planner"]
    trace_id, root_id, _ = hex_ids(root_span)
    _, chat_id, _ = hex_ids(spans["chat gpt-test"])
    _, tool_id, _ = hex_ids(spans["execute_tool book_table"])

    runs = server.get("/api/runs?project=%s" % project)["runs"]
    assert len(runs) == 1
    day = datetime.datetime.fromtimestamp(root_span.start_time / 1e9, datetime.timezone.utc)
    run_id = runs[0]["run_id"]
    assert run_id == "%s-%s" % (project, day.strftime("%Y-%m-%d"))
    assert runs[0]["trace_count"] == 1

    tree = read_tree(server, run_id, trace_id)
    root, chat, tool = tree[root_id], tree[chat_id], tree[tool_id]
    assert (root["kind"], chat["kind"], tool["kind"]) == ("agent", "model", "tool")
    assert chat["parent_span_id"] == root_id and tool["parent_span_id"] == root_id
    assert chat["input"] == [{"role": "user", "content": "Book a table for two"}]
    assert chat["output"] == [{"role": "assistant", "content": "", "finish_reason": "tool_call",
                               "tool_calls": [{"id": "call_9", "type": "function", "function": {
                                   "name": "book_table", "arguments": '{"people":2}'}}]}]
    assert chat["token_count"] == 18
    assert chat["attributes"]["gen_ai.request.model"] == "gpt-test"
    assert tool["step"] == 4
    assert tool["status"] == "error"
    assert tool["error"] == {"message": "no tables left"}
    assert root["status"] == "ok"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_retried_export_stores_nothing_twice(server, encoding):
    run_id = "retry-%s-%s" % (encoding, uuid.uuid4().hex[:8])
    provider = TracerProvider(resource=Resource.create({
        "service.name": "retries", "treeline.run_id": run_id}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    openinference_agent(provider.get_tracer("treeline-otlp-tests"))
    finished = memory.get_finished_spans()
    exporter = make_exporter(encoding, server, gzip=True)
    assert exporter.export(finished) == SpanExportResult.SUCCESS
    assert exporter.export(finished) == SpanExportResult.SUCCESS
    exporter.shutdown()
    trace_id = hex_ids(finished[0])[0]
    assert server.get("/api/runs/%s" % run_id)["trace_count"] == 1
    trace = server.get("/api/runs/%s/traces/%s" % (run_id, trace_id))
    assert trace["span_count"] == 3
    assert trace["error_count"] == 1
    assert trace["token_count"] == 30
