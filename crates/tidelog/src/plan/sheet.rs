//! The vocabulary of a plan: a figure is a labelled result together with the formula
//! that produced it, holding the operand values (not text), so the renderer can print
//! "1,000,000 x 1,000 = 1,000,000,000" and a JSON reader gets the exact numbers.

use serde::Serialize;

/// How a number is printed. The model chooses it per figure so that the printed line
/// looks like the seed's (0.50, 0.0234, 57.9, 1,152).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Style {
    /// Rounded to a whole number, thousands separated.
    Int,
    /// Fixed number of decimals.
    Dec(u8),
    /// Significant digits, for small ratios (0.061, 0.0000579).
    Sig(u8),
    /// Whole numbers as such, otherwise four significant digits.
    Auto,
}

/// What a figure measures; decides the human suffix after the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Unit {
    /// An estimate in bytes: decimal suffix (PB, TB, GB).
    Bytes,
    /// An estimate in bytes per second: decimal suffix (GB/s).
    BytesPerSec,
    /// A configuration value in bytes: binary suffix (MiB, KiB).
    ConfigBytes,
    /// A share of a capacity: percent suffix.
    Fraction,
    Seconds,
    Messages,
    MessagesPerSec,
    Count,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Num {
    pub(crate) value: f64,
    pub(crate) style: Style,
}

impl Num {
    pub(crate) fn new(value: f64, style: Style) -> Self {
        Self { value, style }
    }

    pub(crate) fn int(value: f64) -> Self {
        Self::new(value, Style::Int)
    }

    pub(crate) fn auto(value: f64) -> Self {
        Self::new(value, Style::Auto)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl Op {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "x",
            Op::Div => "/",
        }
    }
}

/// `terms[0] op terms[1] op ...`, evaluated left to right.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Formula {
    pub(crate) op: Op,
    pub(crate) terms: Vec<Num>,
}

impl Formula {
    /// Division by zero yields infinity on purpose: "never drains" is a real answer.
    pub(crate) fn eval(&self) -> f64 {
        let mut terms = self.terms.iter().map(|term| term.value);
        let first = terms.next().unwrap_or(0.0);
        terms.fold(first, |acc, term| match self.op {
            Op::Add => acc + term,
            Op::Sub => acc - term,
            Op::Mul => acc * term,
            Op::Div => {
                if term == 0.0 {
                    f64::INFINITY
                } else {
                    acc / term
                }
            }
        })
    }
}

/// How the exact result of a formula is turned into the figure's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    Exact,
    /// Whole machines, consumers, requests: a fraction still needs one more.
    Up,
    /// Whole records that fit.
    Down,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Figure {
    /// Stable JSON key.
    pub(crate) key: &'static str,
    pub(crate) label: String,
    /// `None` for a stated value (an assumption or a carried figure).
    pub(crate) formula: Option<Formula>,
    pub(crate) value: f64,
    pub(crate) style: Style,
    pub(crate) unit: Unit,
}

impl Figure {
    /// The value with its display style, as an operand or for printing.
    pub(crate) fn numeric(&self) -> Num {
        Num::new(self.value, self.style)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Section {
    pub(crate) title: &'static str,
    pub(crate) figures: Vec<Figure>,
}

/// Collects figures section by section while the model computes.
#[derive(Default)]
pub(crate) struct Sheet {
    pub(crate) sections: Vec<Section>,
}

impl Sheet {
    pub(crate) fn section(&mut self, title: &'static str) {
        self.sections.push(Section {
            title,
            figures: Vec::new(),
        });
    }

    /// A value printed without a formula: an assumption restated where it is used.
    pub(crate) fn given(&mut self, key: &'static str, label: &str, value: Num, unit: Unit) -> Num {
        self.push(Figure {
            key,
            label: label.to_owned(),
            formula: None,
            value: value.value,
            style: value.style,
            unit,
        });
        value
    }

    /// Evaluates `formula`, rounds as asked, records the figure, returns it as an operand.
    pub(crate) fn calc(
        &mut self,
        key: &'static str,
        label: &str,
        formula: Formula,
        round: Round,
        style: Style,
        unit: Unit,
    ) -> Num {
        let exact = formula.eval();
        let value = match round {
            Round::Exact => exact,
            Round::Up => ceil_whole(exact),
            Round::Down => floor_whole(exact),
        };
        self.push(Figure {
            key,
            label: label.to_owned(),
            formula: Some(formula),
            value,
            style,
            unit,
        });
        Num::new(value, style)
    }

    fn push(&mut self, figure: Figure) {
        if self.sections.is_empty() {
            self.section("Plan");
        }
        if let Some(section) = self.sections.last_mut() {
            section.figures.push(figure);
        }
    }
}

pub(crate) fn mul(terms: &[Num]) -> Formula {
    Formula {
        op: Op::Mul,
        terms: terms.to_vec(),
    }
}

pub(crate) fn div(numerator: Num, denominator: Num) -> Formula {
    Formula {
        op: Op::Div,
        terms: vec![numerator, denominator],
    }
}

pub(crate) fn add(terms: &[Num]) -> Formula {
    Formula {
        op: Op::Add,
        terms: terms.to_vec(),
    }
}

pub(crate) fn sub(minuend: Num, subtrahend: Num) -> Formula {
    Formula {
        op: Op::Sub,
        terms: vec![minuend, subtrahend],
    }
}

/// Binary floating point turns 1,200,000 / 100 into 12,000.000000000002 now and then;
/// a result that close to a whole number is that whole number, not one more.
fn snap(value: f64) -> f64 {
    let nearest = value.round();
    if (value - nearest).abs() <= 1e-9 * nearest.abs().max(1.0) {
        nearest
    } else {
        value
    }
}

pub(crate) fn ceil_whole(value: f64) -> f64 {
    snap(value).ceil()
}

pub(crate) fn floor_whole(value: f64) -> f64 {
    snap(value).floor()
}

/// The value a reader sees on the printed line, for the chains where the seed carries
/// the printed figure forward (61 msg/s per partition, 63 requests/s, 33,554 messages).
pub(crate) fn as_printed(num: Num) -> Num {
    let value = match num.style {
        Style::Int => num.value.round(),
        Style::Dec(places) => round_to(num.value, i32::from(places)),
        Style::Sig(digits) => {
            if num.value == 0.0 || !num.value.is_finite() {
                num.value
            } else {
                let magnitude = num.value.abs().log10().floor() as i32;
                round_to(num.value, i32::from(digits) - 1 - magnitude)
            }
        }
        Style::Auto => num.value,
    };
    Num::new(value, num.style)
}

fn round_to(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_evaluate_left_to_right() {
        let sum = add(&[Num::int(1.0), Num::int(2.0), Num::int(3.0)]);
        assert_eq!(sum.eval(), 6.0);
        assert_eq!(div(Num::int(8.0), Num::int(2.0)).eval(), 4.0);
        assert_eq!(sub(Num::int(8.0), Num::int(2.0)).eval(), 6.0);
        assert_eq!(div(Num::int(8.0), Num::int(0.0)).eval(), f64::INFINITY);
    }

    #[test]
    fn whole_rounding_ignores_float_noise() {
        assert_eq!(ceil_whole(12_000.000_000_000_002), 12_000.0);
        assert_eq!(ceil_whole(106.67), 107.0);
        assert_eq!(floor_whole(15.999_999_999_999_998), 16.0);
        assert_eq!(floor_whole(33_554.432), 33_554.0);
    }

    #[test]
    fn printed_values_round_like_the_display() {
        assert_eq!(as_printed(Num::int(61.035)).value, 61.0);
        assert_eq!(as_printed(Num::new(57.87, Style::Dec(1))).value, 57.9);
        assert_eq!(as_printed(Num::new(0.061_035, Style::Sig(2))).value, 0.061);
    }
}
