"""Sibling order: each open carries `ordinal`, the span's creation order among the
children of its parent (0 for a root); the server lists children by it."""

import threading
import time

import pytest

import treeline as tl


def _ordinals(transport, spans):
    opens = transport.opens()
    return [opens[s.span_id].get("ordinal") for s in spans]


def test_roots_are_0_and_children_count_from_0_in_creation_order(make_run, transport):
    run = make_run()
    with run.trace("root") as root:
        children = [root.span("child %d" % i) for i in range(5)]
        # Entered in reverse: the ordinal is the creation order, not the start order.
        for child in reversed(children):
            with child:
                pass
        with children[1]:
            pass
        with root.span("first grandchild parent") as parent:
            grandchildren = [parent.span("g%d" % i).start() for i in range(3)]
            for g in grandchildren:
                g.end()
    other = run.trace("another root").start()
    other.end()
    run.flush()
    assert _ordinals(transport, [root, other]) == [0, 0]
    assert _ordinals(transport, children + [parent]) == [0, 1, 2, 3, 4, 5]
    assert _ordinals(transport, grandchildren) == [0, 1, 2]
    assert [c.ordinal for c in children] == [0, 1, 2, 3, 4]


def test_every_way_of_naming_a_parent_of_this_process_shares_its_counter(make_run, transport):
    run = make_run()
    made = []
    with run.trace("root") as root:
        made.append(root.span("span.span"))                        # 0
        made.append(root.child("tool", "span.child"))              # 1
        with run.span("run.span, the active span") as active:      # 2
            with run.span("under the active one") as nested:       # 0 under `active`
                pass
        made.append(active)
        made.append(run.start_span("start_span", parent_span_id=root.span_id))      # 3
        made.append(tl.span("module helper", parent=root))                          # 4
        made.append(tl.tool("module kind helper"))                                  # 5 (current)
        made.append(root.model("kind helper"))                                      # 6
        made.append(run.span("by id", parent_span_id=root.span_id))                # 7
        made.append(nested.span("sibling by id", parent_span_id=root.span_id))     # 8

        @run.trace_op(name="step")
        def step():
            return 1

        step()                                                                      # 9
        carrier = root.context()
        out = []

        def worker():  # a carrier handed to another thread of this process
            with run.attach_trace_context(carrier) as parent:
                out.append(parent.span("from a thread").start())                    # 10
                out.append(tl.span("from a thread, module", parent=carrier).start())  # 11

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        made.extend(out)
        for span in made:
            span.end()  # opens those not opened yet; a closed one stays as it was
    run.flush()
    opens = transport.opens()
    by_name = {e["name"]: e for e in opens.values()}
    assert by_name["under the active one"]["ordinal"] == 0
    assert by_name["step"]["ordinal"] == 9 and by_name["step"]["parent_span_id"] == root.span_id
    for span in made:
        assert opens[span.span_id]["parent_span_id"] == root.span_id, span.name
    assert [opens[s.span_id]["ordinal"] for s in made] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11]


def test_a_parent_of_another_process_leaves_the_ordinal_to_the_server(make_run, transport):
    run = make_run()
    remote = run.start_span("elsewhere", parent_span_id="00f067aa0ba902b7",
                            trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    remote.end()
    carrier = {"treeline": 1, "run_id": run.run_id, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
               "span_id": "00f067aa0ba902b7", "sampled": True}
    with run.attach_trace_context(carrier) as parent:
        with parent.span("a") as a:
            with a.span("under a") as under_a:
                pass
        with tl.span("b") as b:
            pass
    # A span of this process that has closed is no longer known by its id either.
    with run.trace("root") as root:
        pass
    late = root.span("late, by object")
    late.start()
    late.end()
    by_id = run.start_span("late, by id", parent_span_id=root.span_id, trace_id=root.trace_id)
    by_id.end()
    run.flush()
    opens = transport.opens()
    for span in (remote, a, b, by_id):
        assert "ordinal" not in opens[span.span_id], span.name
    assert opens[under_a.span_id]["ordinal"] == 0  # its parent is an object of this process
    assert opens[late.span_id]["ordinal"] == 0


def test_children_made_from_many_threads_get_distinct_ordinals(make_run, transport):
    run = make_run()
    root = run.trace("root").start()
    spans = []
    lock = threading.Lock()

    def worker():
        mine = [root.span("c") for _ in range(300)]
        with lock:
            spans.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s.ordinal for s in spans) == list(range(1800))
    root.end()


def test_sessions_and_inert_spans(make_run, transport):
    run = make_run()
    with run.session("chat") as session:
        with run.trace("turn") as turn:
            with turn.span("reply") as reply:
                pass
    off = make_run(tracing=False)
    with off.trace("inert") as inert:
        assert inert.span("child").is_recording is False
    run.flush()
    opens = transport.opens()
    assert opens[session._root.span_id]["ordinal"] == 0
    assert opens[turn.span_id]["ordinal"] == 0 and opens[reply.span_id]["ordinal"] == 0


# -- against a real server ----------------------------------------------------------

@pytest.mark.server
def test_siblings_list_in_creation_order_even_when_they_start_together(server, tmp_path):
    run = tl.init("sdk-ordinal", url=server.url, finish_on_exit=False,
                  spool_dir=str(tmp_path / "spool"))
    with run.trace("root", kind="agent") as root:
        # A tight loop: many of these start in the same microsecond.
        fast = []
        for i in range(50):
            with root.span("fast %02d" % i, kind="tool") as span:
                pass
            fast.append(span)
        # The same start time for all, forced; their random span ids are in no order.
        same = root.span("same start times", kind="agent")
        same.start()
        tied = [same.span("tied %02d" % i, kind="tool") for i in range(50)]
        ts = time.time_ns() // 1000
        for span in tied:
            span.start(_ts=ts)
        for span in tied:
            span.end()
        same.end()
        # Started in reverse creation order, with later start times.
        late = [root.span("late %d" % i) for i in range(5)]
        for span in reversed(late):
            span.start()
            span.end()
    assert run.flush() is True

    client = tl.Client(server.url)
    rid, tid = run.run_id, root.trace_id
    (top,) = list(client.spans(rid, tid))
    assert top["span_id"] == root.span_id and top["ordinal"] == 0

    children = list(client.spans(rid, tid, parent=root.span_id, page_size=7))  # paged too
    assert [c["span_id"] for c in children] == [s.span_id for s in fast + [same] + late]
    assert [c["ordinal"] for c in children] == list(range(56))

    listed = list(client.spans(rid, tid, parent=same.span_id))
    assert len({c["start_us"] for c in listed}) == 1
    assert [c["name"] for c in listed] == ["tied %02d" % i for i in range(50)]
    assert [c["ordinal"] for c in listed] == list(range(50))
