"""HTTP transaction records from packet traces without TCP reassembly."""
