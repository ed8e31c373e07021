"""The temporal layer: Chronos C1/C2/C3 questions, OAKS timelines and TPR-RAG relations,
derived from the ledger (questions phrased by the LLM, answers chosen by code)."""
