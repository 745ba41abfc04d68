# Included by ctest after the discovered GoogleTest cases (TEST_INCLUDE_FILES, appended after gtest_discover_tests'):
# the COST, in seconds on 2 cores, of the cases that take longest. ctest -j2 starts tests in descending COST, so
# these start first instead of last, where one of them would run alone on one core while the other sits idle. A
# build that has run ctest before uses its measured times (Testing/Temporary/CTestCostData.txt) instead; a clean CI
# clone has only these. A name this build did not discover (module not built) matches no test: ctest ignores it.
set(_prophet_long_cases
    "BenchRegress.InjectedTrainingSlowdownFailsBothTrainingRowsOnly" 85
    "BenchRegress.QuickModePassesAgainstTheCommittedBaselineAndRecordsEveryRow" 50
    "BenchRegress.InjectedRegressionFailsAfterReMeasuring" 45
    "Trainer.EveryPlacementGivesTheStaticLosses" 30
    "SweepRealCli.CalibratedSweepRecordsAPerOpReplayValidationOfEveryChild" 40
    "SweepRealCli.ValidationRecordsSimulatedAndMeasuredStepTimeAndBuildsTheReport" 30
    "SweepRealCli.CalibrateMeasuresOneClusterPerRanksAndGridValues" 18
    "TrainCli.LossesDoNotDependOnPlacementOrRankCount" 17
    "FasterMoESchedule.TrainingIsBitwiseTheBlockingSchedule" 17
    "Scheduler.LossesAreUnchangedBitwise" 16)
while(_prophet_long_cases)
  list(POP_FRONT _prophet_long_cases _name _cost)
  set_tests_properties("${_name}" PROPERTIES COST ${_cost})
endwhile()
