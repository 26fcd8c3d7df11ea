"""The forwards' `Args` sections, written by `document_args` from their signatures and the shared descriptions."""

import inspect
import textwrap

import pytest

from modeling_elmo import ElmoForPreTraining, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoModel
from modeling_elmo.modeling_elmo import document_args


def documented_names(docstring: str) -> list[str]:
    """The argument names of the `Args` section of `docstring`, in order."""
    args = docstring.split("\nArgs:\n")[1].split("\nReturns:")[0]
    return [line.split(" ")[0] for line in textwrap.dedent(args).splitlines() if line and not line[0].isspace()]


@pytest.mark.parametrize(
    "model_class", [ElmoModel, ElmoForTokenClassification, ElmoForSequenceClassification, ElmoForPreTraining]
)
def test_every_forward_argument_is_described_once_in_order(model_class):
    parameters = inspect.signature(model_class.forward).parameters
    expected = ["return_dict" if name == "kwargs" else name for name in parameters if name != "self"]
    assert documented_names(model_class.forward.__doc__) == expected


def test_shared_descriptions_are_the_same_in_every_head():
    def description(model_class: type, name: str) -> str:
        return model_class.forward.__doc__.split(f"\n    {name} (")[1].split("\n    ")[0]

    heads = (ElmoForTokenClassification, ElmoForSequenceClassification)
    for name in ("input_ids", "attention_mask", "states", "return_dict"):
        assert {description(model_class, name) for model_class in (ElmoModel, *heads)} == {
            description(ElmoModel, name)
        }
    assert description(ElmoForPreTraining, "input_ids") != description(ElmoModel, "input_ids")  # its own: windows


def test_an_argument_described_nowhere_or_not_in_the_signature_is_refused():
    def forward(self, input_ids, mystery):
        """Doc."""

    with pytest.raises(TypeError, match="mystery"):
        document_args(forward)

    def forward_with_stale_args(self, input_ids):
        """
        Doc.

        Args:
            gone (`int`):
                An argument that was removed.
        """

    with pytest.raises(TypeError, match="gone"):
        document_args(forward_with_stale_args)
