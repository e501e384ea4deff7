"""What a run found, without torch: a worker's observed outcome, the judged cell, the matrix, and two matrices
compared."""
