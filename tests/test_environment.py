"""tf_ucudnn.environment: the UCUDNN_* variables Python reads, and setting one
for a block (as divide_workspace_budget sets UCUDNN_MICRO_BATCH_SEARCH=all)."""

import os
from unittest import mock

import tensorflow as tf

from tf_ucudnn import environment

NAME = "UCUDNN_MICRO_BATCH_SEARCH"


class SettingTest(tf.test.TestCase):

    def test_unset_variable_is_set_inside_and_unset_after(self):
        with mock.patch.dict(os.environ):
            os.environ.pop(NAME, None)
            with environment.setting(NAME, "all"):
                self.assertEqual(os.environ[NAME], "all")
            self.assertNotIn(NAME, os.environ)

    def test_set_variable_is_restored_also_after_an_error(self):
        with mock.patch.dict(os.environ, {NAME: "needed"}):
            with self.assertRaises(KeyError):
                with environment.setting(NAME, "all"):
                    self.assertEqual(os.environ[NAME], "all")
                    raise KeyError("inside")
            self.assertEqual(os.environ[NAME], "needed")

    def test_ucudnn_variables_lists_what_is_set(self):
        with mock.patch.dict(os.environ, {NAME: "all", "OTHER": "x"}):
            self.assertEqual(environment.ucudnn_variables()[NAME], "all")
            self.assertNotIn("OTHER", environment.ucudnn_variables())
