"""One policy for many graphs: its training environment over the corpus
(`distribution`), its zero-shot evaluation beside the baselines on graphs
it never saw (`evaluate`; either agent), the held-out graphs timed end to
end beside their estimates (`measured`), the seeds' table (`report`) and
which trained policy ships (`selection`: a rule fixed in code, scored on
the corpus' validation split only).
The policy it trains is saved, loaded and shipped by `xflowrl.policy`.
docs/agents.md, "One policy for many graphs".
"""
