-- Business calendars for runtime schedules (docs/calendars.md): the calendar's name, its
-- definition as resolved when the schedule was written (a market or country of the
-- holidays package, or one of the catalog's [calendars], with its extra dates), and what a
-- fire time on a non-business day does. All three NULL: every day is a business day.
ALTER TABLE runtime_schedules
    ADD COLUMN calendar text,
    ADD COLUMN calendar_definition jsonb,
    ADD COLUMN on_holiday text,
    ADD CONSTRAINT runtime_schedules_on_holiday
        CHECK (on_holiday IN ('skip', 'following')),
    ADD CONSTRAINT runtime_schedules_calendar_defined
        CHECK ((calendar IS NULL) = (calendar_definition IS NULL)
               AND (calendar IS NULL) = (on_holiday IS NULL));
