"""What a fault did: unavailability, client errors, the latency around it, and whether
the messages it cost are allowed at the run's durability level.

Durability levels 1 and 2 (docs/reference/durability.md) promise that no acknowledged
message is lost when a single node fails: acknowledgements wait for a majority of
replicas. Levels 3 and 4 acknowledge from one replica and promise nothing after a
failure; with no level the driver file's settings decide and nothing is promised.
A power cut of the whole cluster (``power-cut@AT/all``) takes every replica's page cache
at once: only level 1 (each in-sync replica fsyncs every message before the
acknowledgement) still promises no loss there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.faults.injector import FaultInjector

__all__ = ["LOSS_PROMISED_LEVELS", "WHOLE_CLUSTER_PROMISED_LEVELS", "FaultVerdict",
           "judge_fault", "questions"]

#: Levels whose acknowledged messages survive a single node failure.
LOSS_PROMISED_LEVELS = (1, 2)
#: Levels whose acknowledged messages survive a power cut of every node at once.
WHOLE_CLUSTER_PROMISED_LEVELS = (1,)
#: A period after the fault whose acknowledged rate is below this share of its target
#: counts as unavailable.
UNAVAILABLE_SHARE = 0.5


@dataclass
class FaultVerdict:
    """The record's ``fault`` block and, when the fault broke a promise, the finding
    that fails the test."""

    block: dict[str, Any]
    finding: str | None = None  # acknowledged messages lost where the level forbids it
    inconclusive: str | None = None  # the fault did not happen as asked


def _whole_cluster_allowed(level: int | None) -> tuple[bool, str]:
    """What a level promises when every node's power is cut at the same instant."""
    if level is None:
        return False, "not judged: no durability level (the driver file's settings decide)"
    if level in WHOLE_CLUSTER_PROMISED_LEVELS:
        return True, ("no: level 1 acknowledges only once the replicas it counts have "
                      "fsynced the message (Kafka: acks=all with flush.messages=1; RabbitMQ: "
                      "a quorum queue's majority; Pulsar: an ack quorum of bookies with "
                      "journalSyncData=true), so a power cut of the whole cluster "
                      "loses none")
    if level == 2:
        return False, ("yes: level 2 replicates before acknowledging but no replica fsyncs "
                       "(Kafka's default flush, RabbitMQ streams, Pulsar's journalSyncData="
                       "false); a power cut of every node "
                       "at once takes every copy in the page cache")
    if level == 3:
        return False, ("yes: level 3 acknowledges from the leader alone; after a whole-"
                       "cluster restart a replica that never had the message may lead, and "
                       "the others truncate to it")
    return False, ("yes: level 4 fsyncs nothing and acknowledges from the leader alone; a "
                   "power cut of every node loses what the page caches held")


def _power_cut_loss(injector: FaultInjector, level: int | None, nodes: int, lost: int,
                    promised: bool, allowed: str, whole: bool) -> tuple[int, bool, str, str]:
    """A power cut's loss is what the broker no longer holds after the restart (the
    read-back), not what no consumer received: a tail read's consumers had every message
    before the cut erased it. On one node, level 3 (its one replica fsyncs before the
    acknowledgement) promises survival too; levels 2 and 4 fsync nothing. A cut of a
    whole cluster of several nodes: only level 1 promises survival."""
    rb = injector.read_back
    if rb is not None and rb.error is None:
        lost = max(lost, rb.missing)
    what = "gone from the broker (read back after the restart)"
    if whole and nodes > 1:
        promised, allowed = _whole_cluster_allowed(level)
        return lost, promised, allowed, what
    if level == 3 and nodes == 1:
        promised = True
        allowed = ("no: level 3 on a single node fsyncs every message on its one replica "
                   "before acknowledging it, so a power cut of that node loses none")
    elif level == 4:
        allowed = ("yes: level 4 fsyncs nothing before acknowledging; a power cut loses "
                   "what the page cache held")
    return lost, promised, allowed, what


def judge_fault(injector: FaultInjector, outcome: RunOutcome, level: int | None,
                nodes: int) -> FaultVerdict:
    """Fold the injector's events and the periods around them into the verdict."""
    spec = injector.spec
    periods = [*outcome.warmup, *outcome.periods]
    t0 = periods[0].start_ns if periods else 0
    struck = injector.first_ns()
    after = [p for p in outcome.periods
             if struck is not None and p.start_ns + p.elapsed_s * 1e9 > struck]
    before = [p for p in outcome.periods
              if struck is not None and p.start_ns + p.elapsed_s * 1e9 <= struck]
    # what the run acknowledged before the fault: a generator that could not reach its
    # target (an invalid latency window) still shows the broker serving, and its loss
    # of service is measured against what it served, not against the target
    served = sorted(p.publish_rate for p in before if p.target_rate > 0)
    baseline = served[len(served) // 2] if served else None

    def down(p: Any) -> bool:
        if p.target_rate <= 0:
            return False
        reference = p.target_rate if baseline is None else min(p.target_rate, baseline)
        return bool(p.publish_rate < UNAVAILABLE_SHARE * reference)

    unavailable = [p for p in after if down(p)]
    # acknowledgements back before the window closed? If not, the messages still waiting
    # are in no histogram yet: the unavailability is a lower bound and the longest wait
    # is unknown (the acknowledged ones waited less)
    recovered = not after or not down(after[-1])
    longest = [m for p in after if (m := p.histograms["publish_response"].max()) is not None]
    if not recovered:
        longest = []
    events = [e.as_dict(t0) for e in injector.events]
    serving = next((e for e in injector.events if e.action == "serving"), None)
    delivery = outcome.delivery
    lost = delivery.lost
    promised = level in LOSS_PROMISED_LEVELS
    if level is None:
        allowed = "not judged: no durability level (the driver file's settings decide)"
    elif promised:
        allowed = f"no: level {level} promises no loss of acknowledged messages after a " \
                  "single node failure"
    else:
        allowed = f"yes: level {level} acknowledges from one replica and promises nothing " \
                  "after a node failure"
    block: dict[str, Any] = {
        "spec": spec.text(),
        "action": spec.action,
        "at_s": spec.at_s,
        "duration_s": spec.duration_s,
        "target": injector.target_note or spec.target,
        "node": injector.node,
        "nodes": nodes,
        "events": events,
        "struck_at_s": round((struck - t0) / 1e9, 3) if struck is not None else None,
        "node_down_s": (round((serving.t_ns - struck) / 1e9, 3)
                        if serving is not None and struck is not None else None),
        "unavailable_s": round(sum(p.elapsed_s for p in unavailable), 3) if struck else None,
        "recovered": recovered if struck else None,
        "recovery_note": None if recovered or not struck else (
            "acknowledgements had not recovered when the measured window ended: "
            "unavailable_s is a lower bound and the longest publish wait is unknown; "
            "strike earlier or measure longer (--brokerperf-duration)"),
        "unavailable_rule": (f"periods after the fault acknowledging < "
                             f"{UNAVAILABLE_SHARE:.0%} of their target rate, or of the "
                             "median rate acknowledged before the fault when that was "
                             f"lower (resolution: one {outcome.plan.period_s:g} s period)"),
        "served_before_msg_s": round(baseline, 1) if baseline is not None else None,
        "longest_publish_wait_s": round(max(longest) / 1e6, 3) if longest else None,
        "send_errors": sum(p.send_errors for p in after),
        "send_errors_total": sum(p.send_errors for p in outcome.periods),
        "lost": lost,
        "unconfirmed": delivery.unconfirmed,
        "durability_level": level,
        "loss_allowed": allowed,
        "error": injector.error,
    }
    finding_what = "lost"
    whole = spec.whole_cluster
    if spec.action == "power-cut":
        if injector.cut_covers:  # one process held every node (a Pulsar standalone)
            whole, nodes = True, injector.cut_covers
            block["nodes"] = nodes
        lost, promised, allowed, finding_what = _power_cut_loss(injector, level, nodes,
                                                                lost, promised, allowed, whole)
        block["lost"] = lost
        block["loss_allowed"] = allowed
        cut = injector.cut_report or {}
        block["power_cut"] = {
            "bytes_dropped": cut.get("bytes_dropped"),
            "files_removed": len(cut.get("removed", [])),
            "files_rolled_back": len(cut.get("restored", [])),
            "removed": list(cut.get("removed", []))[:50],
            "rolled_back": list(cut.get("restored", []))[:50],
            "read_back": (injector.read_back.as_dict() if injector.read_back is not None
                          else None),
        }
        if spec.whole_cluster:
            block["power_cut"]["per_node"] = cut.get("per_node", {})
    block["lost_ranges"] = [r for s in delivery.subscriptions for r in s.lost_ranges][:100]
    if injector.read_back is not None and spec.action == "power-cut":
        block["lost_ranges"] = injector.read_back.missing_ranges
    inconclusive = None
    if injector.error is not None:
        inconclusive = f"fault {spec.text()} did not run as asked: {injector.error}"
    elif struck is None:
        inconclusive = (f"fault {spec.text()} never struck: the measured window ended "
                        f"before {spec.at_s:g} s")
    finding = None
    if promised and lost > 0:
        where, failure = f"node {injector.node} of {nodes}", "a single node failure"
        if whole:
            where, failure = f"all {nodes} node(s) at once", "a power cut of the whole cluster"
        finding = (f"{lost} acknowledged message(s) {finding_what} after {spec.text()} "
                   f"({where}) at durability level {level}, which promises no loss of "
                   f"acknowledged messages after {failure}")
        if injector.read_back is not None and injector.read_back.missing_ranges:
            first = injector.read_back.missing_ranges[0]
            finding += (f"; first missing: producer {first['producer']} sequences "
                        f"{first['first']}-{first['last']}")
    block["verdict"] = ("inconclusive" if inconclusive else "loss-forbidden" if finding
                        else "loss-allowed" if lost else "no-loss")
    block["duplicates"] = delivery.duplicates
    return FaultVerdict(block=block, finding=finding, inconclusive=inconclusive)


def questions(block: dict[str, Any], latency_verdict: str) -> tuple[dict[str, str], str | None]:
    """How each question of a fault run was answered, on what it needs, and the reason the
    test is INCONCLUSIVE, if any (docs/reference/faults.md, "What a fault run judges").

    * loss: the delivery ledgers (and a power cut's read-back) against the durability
      level; needs the drain, not a steady rate: never held back by the latency verdict;
    * duplicates: counted (legal at-least-once), never failing;
    * unavailability: needs acknowledgements to recover inside the window; if they had
      not, the figure is a lower bound and the test is INCONCLUSIVE saying so;
    * latency: the measured periods before the fault, with their own validity verdict,
      which applies to those figures only.
    """
    recovered = block.get("recovered")
    answers = {
        "loss": block["verdict"],
        "duplicates": f"{block.get('duplicates', 0)} (at-least-once: reported, not judged)",
        "unavailability": ("measured" if recovered else
                           "lower bound: acknowledgements had not recovered when the "
                           "window ended" if recovered is False else "not judged"),
        "latency": f"{latency_verdict} (the periods before the fault; applies to the "
                   "latency figures only)",
    }
    why = None
    if recovered is False:
        low = block.get("unavailable_s")
        at = float(block.get("at_s") or 0)
        down = float(block.get("duration_s") or 0)
        why = (f"fault {block['spec']}: acknowledgements had not recovered when the "
               f"measured window ended, so unavailability (>= {low:g} s) is only a lower "
               f"bound. Fix: measure longer, e.g. --brokerperf-duration="
               f"{max(60.0, 3 * (at + down + (low or 0))):g}, or strike earlier")
    return answers, why
