"""The HIP backend (AMD CDNA GPUs, wave64): spellings, MFMA records and their fragments, lowerings."""
