"""`tilec tune`: recommend a kernel's tile configuration (TileLang's Tile Sight, ahead of time).

    space.py     the candidate sets' product, each point analysed statically and pruned
    work.py      what one block does (FLOPs, bytes, which block indices each access reads)
    peaks.py     the GPUs' peak rates and limits, with sources
    model.py     the cost model: roofline per wave, occupancy, waves, latency hiding, L2 reuse
    search.py    enumerate, prune, rank, compile the best through the whole pipeline
    buckets.py   --shape M=LO..HI: one shape per power-of-two bucket
    measure.py   --measure: a worker per GPU timing the best through tilec.runtime
    tunefile.py  FILE.tune.json, which `tilec build --tuned` applies
    report.py    the text
    command.py   the command itself

docs/tune.md describes the model and its formula.
"""
