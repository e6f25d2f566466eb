"""Input readers. Each turns files of one format into Arrow tables of a record schema,
streaming, and turns every bad record or file into a rejected row with its error."""
