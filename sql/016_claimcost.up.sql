-- pgjobd schema v16, claiming by type: the claim reads each served (queue, type) on its
-- own, so due rows of types no daemon has a handler for are never walked past (200,000 of
-- them ahead of the served jobs made every claim 6-30x slower through jobs_claim_idx,
-- which filters types after the index walk). jobs_claim_idx stays for what reads a queue
-- in claim order across types: the limited claim's window, the due-time probes, the
-- queue statistics. CREATE INDEX locks writes to jobs while it builds (about a second per
-- million pending rows).
CREATE INDEX jobs_claim_type_idx ON jobs (queue, type, priority DESC, run_at, id)
  WHERE status IN ('pending', 'failed');
