//! Token counts, one meaning on every wire (README: `input_tokens` counts
//! every input token, cache reads and writes included; `output_tokens`
//! includes reasoning). Here, below every layer, because an attempt's record
//! carries what its provider reported.

/// Token counts, each `None` where the provider did not report it. In a
/// stream, each figure reported replaces the one before ([`Usage::apply`]:
/// the last figure wins, never a sum of partials).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    pub fn apply(&mut self, patch: Usage) {
        let fields = [
            (&mut self.input_tokens, patch.input_tokens),
            (&mut self.output_tokens, patch.output_tokens),
            (&mut self.cache_read_tokens, patch.cache_read_tokens),
            (&mut self.cache_write_tokens, patch.cache_write_tokens),
            (&mut self.reasoning_tokens, patch.reasoning_tokens),
        ];
        for (field, value) in fields {
            if value.is_some() {
                *field = value;
            }
        }
    }
}

impl Usage {
    /// Input and output tokens together (what a `tpm` limit counts), when
    /// either is known.
    pub fn total(&self) -> Option<u64> {
        match (self.input_tokens, self.output_tokens) {
            (None, None) => None,
            (input, output) => Some(input.unwrap_or(0) + output.unwrap_or(0)),
        }
    }

    /// Whether any figure is known.
    pub fn is_known(&self) -> bool {
        self.fields().iter().any(Option::is_some)
    }

    /// The input figures only: what a stream reported before its end, whose
    /// output so far is not what the provider bills.
    pub fn input_only(&self) -> Usage {
        Usage {
            output_tokens: None,
            reasoning_tokens: None,
            ..self.clone()
        }
    }

    fn fields(&self) -> [Option<u64>; 5] {
        [
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.reasoning_tokens,
        ]
    }
}
